"""Earlier attempts kept under <job>/attempts/ (running/attempts.py): what is kept, when, and
what a re-run that fails or is stopped leaves (FakeBackend, no Docker)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.record import new_record, write_record
from flower_batch.layout import Home
from flower_batch.running.attempts import attempt_numbers, keep_previous_attempt, list_attempts, prunable
from tests.batch_fixtures.attempts import finished_attempt, job_spec
from tests.hostile_fixtures import hostile_workspace, outside_secret


def test_a_previous_attempt_moves_whole_to_attempts_n(tmp_path: Path) -> None:
    jd = Home(tmp_path).job("b", "j")
    previous = finished_attempt(jd, 1)
    before = sorted(p.relative_to(jd.root).as_posix() for p in jd.root.rglob("*"))
    dest = keep_previous_attempt(jd, previous, 2)
    assert dest == jd.root / "attempts" / "1"
    after = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*"))
    assert after == before
    assert not jd.workspace.exists() and not jd.runs.exists()
    assert (dest / "workspace" / "answer.txt").read_text() == "attempt 1\n"
    # the next re-run keeps the second attempt beside the first
    second = finished_attempt(jd, 2, "failed")
    keep_previous_attempt(jd, second, 3)
    assert attempt_numbers(jd) == [1, 2]
    assert [a.record.status for a in list_attempts(jd) if a.record] == ["passed", "failed"]
    assert prunable(jd, keep=1) == [jd.root / "attempts" / "1"]
    assert prunable(jd, keep=5) == []


def test_this_runs_queued_record_is_not_an_attempt(tmp_path: Path) -> None:
    jd = Home(tmp_path).job("b", "j")
    jd.root.mkdir(parents=True)
    write_record(jd.record_path, new_record(job_spec("j"), batch="b", image_id="sha256:x", attempt=1))
    assert keep_previous_attempt(jd, None, 1) is None
    assert not (jd.root / "attempts").exists()


def test_an_unfinished_attempt_is_kept_with_the_record_the_planner_read(tmp_path: Path) -> None:
    """The orchestrator died mid-job; this run replaced its record with a `queued` one."""
    jd = Home(tmp_path).job("b", "j")
    from dataclasses import replace

    running = replace(finished_attempt(jd, 1), status="running", finished_at=None)
    write_record(jd.record_path, new_record(job_spec("j"), batch="b", image_id="sha256:x", attempt=2))
    dest = keep_previous_attempt(jd, running, 2)
    assert dest is not None
    assert json.loads((dest / "record.json").read_text())["status"] == "running"
    assert (dest / "runs" / "sessions.db").read_bytes() == b"db"


@pytest.mark.anyio
async def test_a_rerun_whose_setup_fails_keeps_the_previous_verdict_as_an_attempt(
    tmp_path: Path, monkeypatch
) -> None:
    """No ANTHROPIC_API_KEY: the gateway cannot start, the job ends `error` — its earlier passed
    attempt (record, workspace, runs) is in attempts/1, not overwritten."""
    from flower_batch.jobmodel.record import read_record
    from flower_batch.running.plan import BatchPlan
    from flower_batch.running.scheduler import run_jobs
    from tests.fake_backend import FakeBackend

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = Home(tmp_path / "home")
    jd = home.job("b", "j")
    old = finished_attempt(jd, 1)
    async with FakeBackend() as backend:
        done = await run_jobs(
            backend, BatchPlan(home, "b", [(job_spec("j"), old)], PinnedImage("sha256:x", {}), parallel=1)
        )
    assert done["j"].status == "error" and done["j"].attempt == 2
    kept = jd.root / "attempts" / "1"
    assert read_record(kept / "record.json").status == "passed"
    assert (kept / "workspace" / "answer.txt").read_text() == "attempt 1\n"


@pytest.mark.anyio
async def test_ctrl_c_before_a_job_starts_leaves_its_old_attempt_where_it_was(tmp_path: Path) -> None:
    """Two re-runs, one at a time: stopped while the first runs, the second never started, so its
    earlier attempt is still the job folder itself (record, workspace, runs), not in attempts/."""
    import anyio

    from flower_batch.gateway.host.sidecar import READY_LINE
    from flower_batch.jobmodel.record import read_record
    from flower_batch.jobmodel.spec import GatewaySpec
    from flower_batch.running.plan import BatchPlan
    from flower_batch.running.scheduler import run_jobs
    from tests.fake_backend import FakeBackend, Script

    scenario = tmp_path / "s.toml"
    scenario.write_text('[[rules]]\nreply = "hi"\n')
    home = Home(tmp_path / "home")
    gateway = GatewaySpec(mode="scripted", scenario=scenario)
    first, second = job_spec("first", gateway=gateway), job_spec("second", gateway=gateway)
    old_first, old_second = (
        finished_attempt(home.job("b", "first"), 1),
        finished_attempt(home.job("b", "second"), 1),
    )
    programs = {
        "python": Script(duration_s=60, log_lines=[READY_LINE], term_exit_code=143),
        "flower": Script(duration_s=60, term_exit_code=143),
    }  # end at SIGTERM: no grace to wait out

    first_runs = anyio.Event()

    def on_state(job_id: str, state: str) -> None:
        if (job_id, state) == ("first", "running"):
            first_runs.set()

    async with (
        FakeBackend(programs=programs, images={"sha256:x": {}}) as backend,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(
            lambda: run_jobs(
                backend,
                BatchPlan(
                    home,
                    "b",
                    [(first, old_first), (second, old_second)],
                    PinnedImage("sha256:x", {}),
                    parallel=1,
                ),
                on_state,
            )
        )
        await first_runs.wait()
        await anyio.sleep(0.5)  # its container is up: this is Ctrl-C mid-job, the second still waiting
        tg.cancel_scope.cancel()
    assert attempt_numbers(home.job("b", "first")) == [1]  # it had started: kept in attempts/1
    jd = home.job("b", "second")
    assert attempt_numbers(jd) == []
    assert read_record(jd.record_path).status == "passed"
    assert (jd.workspace / "answer.txt").read_text() == "attempt 1\n"
    assert (jd.runs / "sessions.db").read_bytes() == b"db"


def test_a_hostile_attempt_moves_without_following_or_opening_anything(tmp_path: Path) -> None:
    jd = Home(tmp_path / "home").job("b", "j")
    previous = finished_attempt(jd, 1)
    kinds = hostile_workspace(jd.workspace / "evil", outside_secret(tmp_path / "outside"))
    os.mkfifo(jd.runs / "manifest.fifo")
    (jd.logs / "container.log").unlink(missing_ok=True)
    (jd.logs / "container.log").symlink_to(tmp_path / "outside" / "passwd")
    (jd.root / "attempts").mkdir()
    (jd.root / "attempts" / "7").symlink_to(tmp_path / "outside")  # a number that is no folder of ours
    started = time.monotonic()
    dest = keep_previous_attempt(jd, previous, 2)
    assert time.monotonic() - started < 5 and dest == jd.root / "attempts" / "1"
    assert (dest / "logs" / "container.log").is_symlink() and (dest / "runs" / "manifest.fifo").exists()
    for name in kinds:
        assert os.path.lexists(dest / "workspace" / "evil" / name)  # moved as they were
    assert attempt_numbers(jd) == [1]
