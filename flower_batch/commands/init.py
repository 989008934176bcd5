"""`flower-batch init`: a starter jobs.toml, flows.py and an offline scenario in the current
folder, so `run .` and `matrix jobs.toml` work right after `image build`, with no API key (the
scripted model plays scenarios/offline.toml). It never overwrites a file: any of them already
there is one line, and nothing is written."""

from __future__ import annotations

import re
from pathlib import Path

from flower_batch.commands.common import err, fail

SCENARIO = "scenarios/offline.toml"
PROMPT = "Look at the project and write NOTES.md: what it is, in three lines."

JOBS_TOML = """\
# flower-batch jobs, written by `flower-batch init`: `flower-batch matrix jobs.toml -j 2`.
# Offline as written: the model is the scripted scenario in {scenario}. For the real model,
# set gateway = {{ mode = "anthropic" }} (with ANTHROPIC_API_KEY exported) and write your task
# as the prompt.
[batch]
name = "{name}"

[defaults]
workflow = "flows:${{{{ matrix.variant }}}}"
prompt = "{prompt}"
timeout = "10m"
gateway = {{ mode = "scripted", scenario = "{scenario}" }}

[tasks.notes]
workspace = "."
# What a job's copy of the project leaves out (beside .flowerbatchignore and the home): editing
# this file or the scenario does not re-run finished jobs.
exclude = ["jobs.toml", "scenarios/"]
check = "test -s NOTES.md"

[matrix]
variant = ["main", "careful"]
repeat = 2
"""

FLOWS_PY = '''\
"""Workflows for flower-batch, written by `flower-batch init`: edit them freely.

`main` does the task in one step; `careful` adds a review step that continues the same session.
jobs.toml runs both; `flower-batch run . -f flows.py:main --prompt "..."` runs one job.
"""

from flower import AgentSpec, Step, Workflow

WORKER = AgentSpec(
    "worker",
    instructions="You work on the project in the current directory. Do the task; keep changes small.",
    allowed_tools=["Read", "Write", "Edit", "Bash", "Glob", "Grep"],
    permission_mode="bypassPermissions",
    max_turns=30,
)
DEFAULT_TASK = "{prompt}"


def _task(ctx: dict) -> str:
    return ctx.get("prompt") or DEFAULT_TASK


def main() -> Workflow:
    return Workflow([Step("work", WORKER, _task)], name="main")


def careful() -> Workflow:
    review = Step(
        "review",
        WORKER,
        "Review what you changed once more. Say CHECKED when it is right.",
        resume_from="work",
        gate=lambda result, ctx: "CHECKED" in result.text,
    )
    return Workflow([Step("work", WORKER, _task), review], name="careful")
'''

SCENARIO_TOML = """\
# The offline model of the starter jobs (`flower-batch init`): it writes NOTES.md and says so,
# and passes the careful variant's review. Format: flower's docs/scenario-format.md.
description = "flower-batch init: offline starter"

[defaults]
usage = {{ input_tokens = 1000, output_tokens = 100 }}

[[rules]]
name = "review"
last_user_contains = "Review what you changed"
reply = "Looked at NOTES.md again: CHECKED"

[[rules]]
name = "write the notes"
last_is_tool_result = false
reply = [{{ text = "Writing NOTES.md." }}, {{ tool_use = {{ name = "Write", input = {{ file_path = "{{cwd}}/NOTES.md", content = "A project.\\nNotes written offline by the scripted model.\\nReplace the scenario with a real model to do real work.\\n" }} }} }}]

[[rules]]
name = "written"
last_is_tool_result = true
tool_result_contains = "NOTES.md"
reply = "Wrote NOTES.md."
"""


def starter_files(folder: Path) -> dict[str, str]:
    """The files init writes, by path relative to `folder`."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.resolve().name).strip("-.") or "project"
    if not name[0].isalnum():
        name = "p" + name
    return {
        "jobs.toml": JOBS_TOML.format(name=name[:100], prompt=PROMPT, scenario=SCENARIO),
        "flows.py": FLOWS_PY.replace("{prompt}", PROMPT),
        SCENARIO: SCENARIO_TOML.format(),
    }


def init() -> None:
    """Write a starter jobs.toml, flows.py and an offline scenario here; never overwrites a file."""
    folder = Path.cwd()
    files = starter_files(folder)
    present = [rel for rel in files if (folder / rel).exists() or (folder / rel).is_symlink()]
    if present:
        fail(
            f"{folder / present[0]} already exists: init never overwrites a file; "
            "move it away, or run init in another folder"
        )
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as f:  # "x": a file made meanwhile is not overwritten
            f.write(text)
        err.print(f"wrote {rel}", markup=False, highlight=False)
    err.print(
        "next: flower-batch image build · flower-batch run . -f flows.py:main "
        f'--scenario {SCENARIO} --check "test -s NOTES.md" · flower-batch matrix jobs.toml -j 2',
        markup=False,
        highlight=False,
    )
