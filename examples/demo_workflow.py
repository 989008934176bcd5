"""`make demo-flow`: a two-step flower workflow, fully offline, against the scripted model.

Step 1 (survey) really runs the Read tool on demo-workspace/NOTES.md; step 2 (plan) continues
step 1's session (resume_from), so the model sees the whole history. Every line of output says
that the model is the offline scripted one.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import anyio

from flower import AgentSpec, Runtime, Step, Workflow
from flower.cli.display import SCRIPTED_LABEL, Display
from flower.scripted import Scenario, ScriptedServer

HERE = Path(__file__).resolve().parent

surveyor = AgentSpec("surveyor", instructions="ROLE: surveyor. Read the notes, report the cause.")
planner = AgentSpec("planner", instructions="ROLE: planner. Turn the finding into a plan.")

workflow = Workflow(
    [
        Step("survey", surveyor, "Why is the build broken? Look at the notes."),
        Step("plan", planner, "Now write the fix plan.", resume_from="survey"),
    ],
    name="demo",
    continuous=False,
)


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="flower-demo-"))
    workspace = work / "workspace"
    shutil.copytree(HERE / "demo-workspace", workspace)
    display = Display(verbose=True)
    display.console.print(f"[magenta]model: {SCRIPTED_LABEL}[/magenta]")
    scenario = Scenario.load(HERE / "scenarios" / "demo-flow.toml")
    with ScriptedServer(scenario, log_path=work / "model-requests.jsonl") as srv:
        rt = Runtime(workspace=workspace, run_dir=work / "runs", env=srv.env(work / "claude-config"))
        ctx = anyio.run(lambda: workflow.run(rt, on_event=display.event, on_step=display.step_done))
        rt.close()
    for name in ("survey", "plan"):
        display.out.print(f"[bold]{name}[/bold] (scripted model): {ctx.get(name, '(failed)')}")
    display.summary(rt)
    return 1 if ctx.get("_failed_at") else 0


if __name__ == "__main__":
    sys.exit(main())
