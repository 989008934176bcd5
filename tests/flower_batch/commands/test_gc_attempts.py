"""`flower-batch gc --attempts --keep N [--dry-run]`: the only way kept attempts go."""

from __future__ import annotations

from pathlib import Path

from flower_batch.layout import Home
from flower_batch.matrix import (
    JobSpec,
    new_record,
    write_record,
)
from flower_batch.running.attempts import attempt_numbers, keep_previous_attempt


def _job(job_id: str = "j", **fields: object) -> JobSpec:
    return JobSpec(id=job_id, task="t", variant="v", repeat=1, matrix={}, prompt="p", **fields)  # type: ignore[arg-type]


# -- attempts ------------------------------------------------------------------------------------
def _finished(jd, attempt: int, status: str = "passed"):  # noqa: ANN001, ANN202
    job = _job(jd.job)
    record = new_record(job, batch=jd.batch, image_id="sha256:x", attempt=attempt)
    from dataclasses import replace

    record = replace(record, status=status, finished_at="2026-01-01T00:00:00+00:00")
    jd.make()
    write_record(jd.record_path, record)
    (jd.workspace / "answer.txt").write_text(f"attempt {attempt}\n")
    (jd.runs / "manifest.json").write_text("[]")
    (jd.runs / "sessions.db").write_bytes(b"db")
    (jd.logs / "container.log").write_text("log\n")
    return record


def test_gc_attempts_keeps_the_newest_n_and_dry_run_removes_nothing(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flower_batch.cli import app

    jd = Home(tmp_path / "home").job("b", "j")
    for n in (1, 2, 3):
        _finished(jd, n)
        keep_previous_attempt(jd, jd.record(), n + 1)
    _finished(jd, 4)
    run = CliRunner().invoke
    home = ["--home", str(tmp_path / "home")]
    assert run(app, ["gc", "--keep", "1", *home]).exit_code == 2  # --keep alone is no prune
    dry = run(app, ["gc", "--attempts", "--keep", "1", "--dry-run", *home])
    assert dry.exit_code == 0 and "would remove 2 earlier attempt(s)" in dry.output
    assert attempt_numbers(jd) == [1, 2, 3]
    done = run(app, ["gc", "--attempts", "--keep", "1", *home])
    assert done.exit_code == 0 and attempt_numbers(jd) == [3]
    assert jd.record().attempt == 4 and (jd.workspace / "answer.txt").read_text() == "attempt 4\n"
