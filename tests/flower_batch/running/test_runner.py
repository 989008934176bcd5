"""run_job's failures end as records, never tracebacks: a workspace that cannot be copied, a
container that never stops (FakeBackend, no Docker)."""

from __future__ import annotations

from pathlib import Path

import pytest


def _spec(job_id: str, mode: str = "anthropic"):
    from flower_batch.matrix import GatewaySpec, JobSpec

    return JobSpec(id=job_id, task="t", variant="v", repeat=1, matrix={}, prompt="hi", gateway=GatewaySpec(mode=mode))


async def _run_one(tmp_path: Path, backend, job) -> object:
    from flower_batch.backend.fake import FakeBackend
    from flower_batch.gateway.sidecar import GatewaySidecar
    from flower_batch.layout import Home
    from flower_batch.running.runner import JobContext, run_job

    gw = GatewaySidecar(backend, batch="b", session="s1", image_id=FakeBackend.IMAGE, batch_dir=tmp_path / "b",
                        scenario=None, mode="replay")
    await backend.create_network(gw.network, {}, internal=True)
    ctx = JobContext(backend=backend, batch="b", session="s1", image_id=FakeBackend.IMAGE, gateway=gw)
    return await run_job(ctx, job, Home(tmp_path / "home").job("b", job.id))


@pytest.mark.anyio
async def test_a_job_whose_workspace_cannot_be_copied_ends_error_with_a_record(tmp_path: Path) -> None:
    from dataclasses import replace

    from flower_batch.backend.fake import FakeBackend
    from flower_batch.layout import Home
    from flower_batch.matrix import read_record

    job = replace(_spec("gone", mode="replay"), workspace=tmp_path / "no-such-workspace")
    async with FakeBackend() as backend:
        record = await _run_one(tmp_path, backend, job)
    on_disk = read_record(Home(tmp_path / "home").job("b", "gone").record_path)
    assert on_disk.status == "error" and on_disk.finished and on_disk == record
    assert "no-such-workspace" in (on_disk.reason or "") and "\n" not in (on_disk.reason or "")


@pytest.mark.anyio
async def test_a_container_that_never_stops_ends_error_not_a_traceback(tmp_path: Path) -> None:
    from flower_batch.backend.fake import FakeBackend, Script

    class Stuck(FakeBackend):
        async def wait(self, container_id: str, timeout: float | None = None) -> int:
            raise TimeoutError

    job = replace_timeout(_spec("stuck", mode="replay"), 0.05)
    async with Stuck(default=Script(duration_s=0.01)) as backend:
        record = await _run_one(tmp_path, backend, job)
    assert record.status == "error"  # type: ignore[attr-defined]
    assert "did not stop" in (record.reason or "")  # type: ignore[attr-defined]


def replace_timeout(job, seconds: float):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    return replace(job, timeout_s=seconds)
