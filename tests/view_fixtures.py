"""Fixture batches for the viewer and report tests, made the way a batch is made: the real flower
runtime (real SDK + bundled CLI against the scripted server) runs in the job's own workspace
copy and run_dir; the job's record.json is written with the matrix's own record code."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from flower import starter_flow
from flower.runtime.engine import Runtime
from flower.scripted import Scenario, ScriptedServer
from flower_batch.jobmodel.record import JobRecord, new_record, write_record
from flower_batch.jobmodel.spec import GatewaySpec, JobSpec

STARTER = Path(__file__).resolve().parent.parent / "examples" / "scenarios" / "starter.toml"


def write_source(root: Path) -> Path:
    """A task's source workspace: one file the job keeps, one it changes, one it removes, one binary."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "keep.txt").write_text("keep\n")
    (root / "notes.md").write_text("line one\nline two\nline three\n")
    (root / "old.txt").write_text("to be removed\n")
    (root / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    return root


def run_starter(job_dir: Path, source: Path, prompt: str = "make hello.txt say hi") -> None:
    """The starter flow, scripted, in `<job_dir>/workspace` (a copy of `source`) with run_dir `<job_dir>/runs`."""
    ws, runs = job_dir / "workspace", job_dir / "runs"
    shutil.copytree(source, ws)
    runs.mkdir(parents=True, exist_ok=True)

    async def go() -> None:
        with ScriptedServer(Scenario.load(STARTER), log_path=job_dir / "model.jsonl") as srv:
            wf = starter_flow(prompt, workspace=ws, run_dir=runs, timeout_s=0)
            rt = Runtime(
                workspace=ws,
                run_dir=runs,
                env=srv.env(job_dir / "cfg"),
                workbench=wf.workbench,
                resilience=False,
            )
            try:
                await wf.run(rt)
            finally:
                rt.close()

    anyio.run(go)
    # What the agent did to the workspace besides hello.txt, so the diff has every kind.
    (ws / "old.txt").unlink()
    (ws / "notes.md").write_text("line one\nline 2\nline three\nline four\n")
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02binary, changed")


def record(
    batch: str,
    job: str,
    status: str = "passed",
    *,
    task: str = "hello",
    variant: str = "base",
    source: Path | None = None,
    **fields: Any,
) -> JobRecord:
    spec = JobSpec(
        id=job,
        task=task,
        variant=variant,
        repeat=1,
        matrix={"model": variant},
        prompt="make hello.txt say hi",
        workspace=source,
        gateway=GatewaySpec(mode="scripted"),
    )
    return replace(new_record(spec, batch=batch, image_id="sha256:" + "f" * 64, status=status), **fields)


def write_job(home: Path, batch: str, job: str, status: str = "passed", **kw: Any) -> Path:
    root = home / batch / job
    root.mkdir(parents=True, exist_ok=True)
    write_record(root / "record.json", record(batch, job, status, **kw))
    return root


XSS = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
HANDOFF_DOC = """## 现在在做什么
在 build the thing, 读完了 note.txt。

## 已经定下的
水果是 banana。

## 走不通的路
没有。

## 下一步
写出结论 FINAL-BANANA。

## 现场
note.txt 在工作区根目录。
"""


def handoff_rules() -> list[dict]:
    """One step that crosses the handoff line (tests/flower/context/test_handoff.py's numbers); its text, the
    file it reads and so its tool result all carry markup that must stay text."""
    return [
        {
            "name": "successor",
            "when": {"last_user_contains": "你在接手一个进行中的任务"},
            "usage": {"input_tokens": 900},
            "reply": [{"text": "finished after handoff " + XSS}],
        },
        {
            "name": "doc",
            "when": {"last_user_contains": "现在写交接文档"},
            "usage": {"input_tokens": 12_400},
            "reply": [{"text": HANDOFF_DOC}],
        },
        {
            "name": "work",
            "when": {"last_user_contains": "build the thing", "last_is_tool_result": False},
            "usage": {"input_tokens": 12_000},
            "reply": [
                {"text": "Started. " + XSS},
                {"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/note.txt"}}},
            ],
        },
        {
            "name": "check",
            "when": {"last_user_contains": "check the note", "last_is_tool_result": False},
            "reply": [{"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/note.txt"}}}],
        },
        {
            "name": "after-tool",
            "when": {"last_is_tool_result": True},
            "delay_s": 2,
            "reply": [{"text": "the note is read"}],
        },
    ]


def run_handoff(job_dir: Path, source: Path) -> None:
    """A step that hands over to a successor, then one that reads a file full of markup, in
    `<job_dir>/workspace` and `<job_dir>/runs`."""
    from flower import AgentSpec, Step, Workflow
    from flower.context.handoff import Handoff

    ws, runs = job_dir / "workspace", job_dir / "runs"
    shutil.copytree(source, ws)
    (ws / "note.txt").write_text("the fruit is banana " + XSS + "\n")

    async def go() -> None:
        scenario = Scenario.from_dict({"rules": handoff_rules()})
        with ScriptedServer(scenario, log_path=job_dir / "model.jsonl") as srv:
            rt = Runtime(
                workspace=ws,
                run_dir=runs,
                env=srv.env(job_dir / "cfg"),
                resilience=False,
                handoff=Handoff(window=60_000),
            )
            try:
                spec = AgentSpec("worker", instructions="ROLE=worker", allowed_tools=["Read"])
                await Workflow(
                    [Step("干活", spec, "build the thing"), Step("检查", spec, "check the note")]
                ).run(rt)
            finally:
                rt.close()

    anyio.run(go)


_BUILT: dict[str, Path] = {}


def real_home(base: Path) -> Path:
    """A home with batch `nightly`: two jobs run for real (the starter flow; a handoff whose
    messages carry markup), one failed with markup in its reason, one still queued. Built once
    per test process (the real runs take a few seconds each)."""
    if "home" in _BUILT:
        return _BUILT["home"]
    home, source = base / "home", write_source(base / "task-src")
    root = write_job(
        home,
        "nightly",
        "hello-base-1",
        "passed",
        source=source,
        cost_usd=0.2178,
        num_turns=13,
        duration_s=4.5,
    )
    run_starter(root, source)
    root = write_job(
        home,
        "nightly",
        "build-handoff-1",
        "passed",
        task="build",
        variant="handoff",
        source=source,
        cost_usd=0.05,
        num_turns=3,
        duration_s=6.0,
    )
    run_handoff(root, source)
    write_job(
        home,
        "nightly",
        "hello-fast-1",
        "failed",
        variant="fast",
        source=source,
        cost_usd=0.01,
        reason="check exited 1 " + XSS,
    )
    write_job(home, "nightly", "hello-fast-2", "queued", variant="fast", source=source)
    for job in ("hello-base-1", "build-handoff-1"):  # the runs' own scratch, not part of a batch job
        shutil.rmtree(home / "nightly" / job / "cfg", ignore_errors=True)
        (home / "nightly" / job / "model.jsonl").unlink(missing_ok=True)
    _BUILT["home"] = home
    return home
