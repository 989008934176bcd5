"""A job's finished attempt on disk (record, workspace, runs, logs), for the tests of kept
attempts: moving one to attempts/<n>/ and `gc --attempts`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flower_batch.jobmodel.record import JobRecord, new_record, write_record
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.layout import JobDir


def job_spec(job_id: str = "j", **fields: Any) -> JobSpec:
    return JobSpec(id=job_id, task="t", variant="v", repeat=1, matrix={}, prompt="p", **fields)


def finished_attempt(jd: JobDir, attempt: int, status: str = "passed") -> JobRecord:
    """Attempt `attempt` of the job at `jd`, ended with `status`, with a file in each folder."""
    record = replace(
        new_record(job_spec(jd.job), batch=jd.batch, image_id="sha256:x", attempt=attempt),
        status=status,
        finished_at="2026-01-01T00:00:00+00:00",
    )
    jd.make()
    write_record(jd.record_path, record)
    (jd.workspace / "answer.txt").write_text(f"attempt {attempt}\n")
    (jd.runs / "manifest.json").write_text("[]")
    (jd.runs / "sessions.db").write_bytes(b"db")
    (jd.logs / "container.log").write_text("log\n")
    return record
