"""The home's reserve and a full home (issue 36), without Docker: jobs under the reserve are
skipped with the reason and never retried in the same command, a paused job stays paused, a
reserve no disk could hold is refused, and a record's room lets its last write through a full
disk while the previous record stays whole."""

from __future__ import annotations

import errno
from dataclasses import replace
from pathlib import Path

import pytest

from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.record import ROOM_NAME, new_record, read_record, write_record
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.status import Status
from flower_batch.layout import Home
from flower_batch.running import home_space
from flower_batch.running.home_space import overcommitted, reserve_bytes, reserve_problem, under_reserve
from flower_batch.running.infra_retry import is_infrastructure
from flower_batch.running.plan import BatchPlan
from flower_batch.running.scheduler import run_jobs
from tests.fake_backend import FakeBackend


def _spec(job_id: str) -> JobSpec:
    return JobSpec(id=job_id, task="t", variant="v", repeat=1, matrix={}, prompt="hi")


def test_the_reserve_is_a_share_per_job_at_once_and_at_least_1g(tmp_path: Path) -> None:
    assert reserve_bytes(1, None) == 1024**3 and reserve_bytes(32, None) == 32 * 64 * 1024**2
    assert reserve_bytes(32, 5) == 5
    assert under_reserve(tmp_path, 1) is None
    why = under_reserve(tmp_path, 1 << 62)
    assert why is not None and why.startswith("not started: the home's disk (") and "--reserve" in why
    problem = reserve_problem(tmp_path, 1 << 62)
    assert problem is not None and "larger than the home's whole disk" in problem


@pytest.mark.anyio
async def test_jobs_under_the_reserve_are_skipped_and_a_paused_one_stays_paused(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    paused_job = replace(_spec("long"), persistent=True)
    paused = new_record(paused_job, batch="b", image_id="sha256:img", attempt=1).with_outcome(
        JobOutcome(job_id="long", status=Status.PAUSED, gateway_mode="anthropic", reason="budget reached"),
        finished_at="2026-01-01T00:00:00+00:00",
    )
    write_record(home.job("b", "long").record_path, paused)
    plan = BatchPlan(
        home,
        "b",
        [(_spec("new"), None), (paused_job, paused)],
        PinnedImage("sha256:img", {}),
        reserve=1 << 62,
        wake=frozenset({"long"}),
    )
    async with FakeBackend() as backend:
        done = await run_jobs(backend, plan)
    new = read_record(home.job("b", "new").record_path)
    assert new.status is Status.SKIPPED and new.failure_class == "infrastructure"
    assert new.reason is not None and "under its reserve" in new.reason
    assert not is_infrastructure(new)  # not run again in this command: the disk is still full
    still = read_record(home.job("b", "long").record_path)
    assert (
        still.status is Status.PAUSED and still.attempt == 1 and "under its reserve" in (still.reason or "")
    )
    assert done["new"].status is Status.SKIPPED


def test_disks_that_could_not_all_fill_at_once_are_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gib = 1024**3
    monkeypatch.setattr(home_space, "free_bytes", lambda _root: 25 * gib)
    # 4 jobs of 10 GiB, 2 at once: 20 GiB fits above a 4 GiB reserve; 3 at once do not
    assert overcommitted(tmp_path, 4 * gib, [10 * gib] * 4, 2) is None
    why = overcommitted(tmp_path, 4 * gib, [10 * gib] * 4, 3)
    assert why is not None and "could write 30.00 GiB" in why and "21.00 GiB" in why and "-j" in why
    # the largest disks count: one 30 GiB job among small ones
    assert overcommitted(tmp_path, 4 * gib, [gib, 30 * gib, gib], 1) is not None
    assert overcommitted(tmp_path, 4 * gib, [], 8) is None


def test_a_full_disk_keeps_the_previous_record_and_the_room_lets_the_last_one_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import flower_batch.jobmodel.record as record_module

    path = tmp_path / "job" / "record.json"
    running = replace(
        new_record(_spec("j"), batch="b", image_id="sha256:img", attempt=1), status=Status.RUNNING
    )
    write_record(path, running)
    room = path.parent / ROOM_NAME
    assert room.stat().st_size == record_module.ROOM_BYTES
    real = record_module.write_atomic

    def full_unless_room_freed(target: Path, text: str) -> None:
        if room.exists():
            raise OSError(errno.ENOSPC, "No space left on device", str(target))
        real(target, text)

    monkeypatch.setattr(record_module, "write_atomic", full_unless_room_freed)
    finished = running.with_outcome(
        JobOutcome(job_id="j", status=Status.FAILED, gateway_mode="anthropic", reason="x"),
        finished_at="2026-01-01T00:00:00+00:00",
    )
    write_record(path, finished)
    assert read_record(path).status is Status.FAILED and not room.exists()
    # With no room left, a write that meets a full disk raises and the last record stays whole.
    monkeypatch.setattr(
        record_module, "write_atomic", lambda *_: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full"))
    )
    with pytest.raises(OSError):
        write_record(path, running)
    assert read_record(path).status is Status.FAILED
