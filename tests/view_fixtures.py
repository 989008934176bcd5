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
from flower.runtime import Runtime
from flower.scripted import Scenario, ScriptedServer
from flower_batch.matrix import GatewaySpec, JobRecord, JobSpec, new_record, write_record

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
            rt = Runtime(workspace=ws, run_dir=runs, env=srv.env(job_dir / "cfg"), workbench=wf.workbench,
                         resilience=False)
            try:
                await wf.run(rt)
            finally:
                rt.close()

    anyio.run(go)
    # What the agent did to the workspace besides hello.txt, so the diff has every kind.
    (ws / "old.txt").unlink()
    (ws / "notes.md").write_text("line one\nline 2\nline three\nline four\n")
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02binary, changed")


def record(batch: str, job: str, status: str = "passed", *, task: str = "hello", variant: str = "base",
           source: Path | None = None, **fields: Any) -> JobRecord:
    spec = JobSpec(id=job, task=task, variant=variant, repeat=1, matrix={"model": variant},
                   prompt="make hello.txt say hi", workspace=source, gateway=GatewaySpec(mode="scripted"))
    return replace(new_record(spec, batch=batch, image_id="sha256:" + "f" * 64, status=status), **fields)


def write_job(home: Path, batch: str, job: str, status: str = "passed", **kw: Any) -> Path:
    root = home / batch / job
    root.mkdir(parents=True, exist_ok=True)
    write_record(root / "record.json", record(batch, job, status, **kw))
    return root
