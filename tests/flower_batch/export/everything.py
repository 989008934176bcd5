"""A job with a subagent, judge rounds and a handoff in one run: the starter flow (its work step
dispatches a `coder` subagent, its judge says not_yet then achieved), whose first judge round's
context crosses the handoff line, so that judge hands over to a successor that gives the verdict.
The real flower runtime against the scripted server, as tests/view_fixtures.py runs its jobs."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import anyio

from flower import starter_flow
from flower.context.handoff import Handoff
from flower.runtime.engine import Runtime
from flower.scripted import Scenario, ScriptedServer
from tests.view_fixtures import HANDOFF_DOC, STARTER, write_job, write_source

JUDGE = "## 独立判定"


def scenario() -> Scenario:
    starter = tomllib.loads(STARTER.read_text())
    first = [
        {
            "name": "handoff doc",
            "when": {"last_user_contains": "现在写交接文档"},
            "reply": [{"text": HANDOFF_DOC}],
        },
        {
            "name": "judge successor reads again",
            "when": {
                "system_contains": JUDGE,
                "last_user_contains": "你在接手一个进行中的任务",
                "last_is_tool_result": False,
            },
            "reply": [{"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/hello.txt"}}}],
        },
        {
            "name": "judge reads with a full context",
            "when": {
                "system_contains": JUDGE,
                "last_user_contains": "hello.txt 存在",
                "last_is_tool_result": False,
            },
            "usage": {"input_tokens": 12_000},
            "reply": [{"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/hello.txt"}}}],
        },
    ]
    return Scenario.from_dict({**starter, "rules": first + starter["rules"]})


def everything_job(home: Path, source_base: Path) -> Path:
    """Batch `nightly`, job `hello-everything-1`: run, and its record written (passed)."""
    source = write_source(source_base / "everything-src")
    root = write_job(home, "nightly", "hello-everything-1", "passed", variant="everything", source=source)
    ws, runs = root / "workspace", root / "runs"
    shutil.copytree(source, ws)
    runs.mkdir(parents=True, exist_ok=True)

    async def go() -> None:
        with ScriptedServer(scenario(), log_path=root / "model.jsonl") as srv:
            wf = starter_flow("make hello.txt say hi", workspace=ws, run_dir=runs, timeout_s=0)
            rt = Runtime(
                workspace=ws,
                run_dir=runs,
                env=srv.env(root / "cfg"),
                workbench=wf.workbench,
                resilience=False,
                handoff=Handoff(window=60_000),
            )
            try:
                await wf.run(rt)
            finally:
                rt.close()

    anyio.run(go)
    shutil.rmtree(root / "cfg", ignore_errors=True)
    (root / "model.jsonl").unlink(missing_ok=True)
    return root
