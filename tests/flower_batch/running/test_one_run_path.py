"""One run path (issue 32): `run`, `wake` and `repro` run a batch of one through the path `matrix`
takes (running/batch.py -> scheduler.run_jobs -> runner.run_job), so a change to a job's context
made in its one place (`BatchRun.context`) reaches both. FakeBackend, no Docker."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from flower_batch.gateway.host.sidecar import READY_LINE
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.record import new_record
from flower_batch.jobmodel.spec import GatewaySpec, JobSpec
from flower_batch.jobmodel.status import Status
from flower_batch.layout import Home
from flower_batch.running import batch, scheduler
from flower_batch.running.plan import BatchPlan
from tests.fake_backend import FakeBackend, FakeProcess

REPO = Path(__file__).resolve().parents[3]


async def serving(proc: FakeProcess) -> int:
    proc.log(f"{READY_LINE} on 0.0.0.0:8080 mode=scripted")
    await anyio.sleep(3600)
    return 0


def _job(tmp_path: Path, job_id: str) -> JobSpec:
    scenario = tmp_path / "s.toml"
    scenario.write_text('[[rules]]\nreply = "hi"\n')
    gateway = GatewaySpec(mode="scripted", scenario=scenario)
    return JobSpec(id=job_id, task="t", variant="v", repeat=1, matrix={}, prompt="hi", gateway=gateway)


@pytest.mark.anyio
async def test_a_change_to_the_job_context_reaches_run_and_matrix_alike(tmp_path: Path, monkeypatch) -> None:
    marker = tmp_path / "marked"
    made = scheduler.BatchRun.context

    def marked_context(self, gateway):  # type: ignore[no-untyped-def]
        return replace(made(self, gateway), search=[marker])

    seen: list[tuple[str, str, list[Path]]] = []

    async def run_job(ctx, job, jd, **how):  # type: ignore[no-untyped-def]
        seen.append((ctx.batch, job.id, list(ctx.search)))
        outcome = JobOutcome(job_id=job.id, status=Status.PASSED, gateway_mode=job.gateway.mode)
        return new_record(job, batch=ctx.batch, image_id=ctx.image.id).with_outcome(outcome)

    monkeypatch.setattr(scheduler.BatchRun, "context", marked_context)
    monkeypatch.setattr(scheduler, "run_job", run_job)
    home = Home(tmp_path / "home")
    one = BatchPlan(home, "adhoc", ((_job(tmp_path, "single"), None),), PinnedImage(FakeBackend.IMAGE, {}))
    many = BatchPlan(
        home,
        "b",
        [(_job(tmp_path, "m1"), None), (_job(tmp_path, "m2"), None)],
        PinnedImage(FakeBackend.IMAGE, {}),
        parallel=2,
    )
    with anyio.fail_after(20):
        async with FakeBackend(programs={"python": serving}) as backend:
            single = await batch.run_one(backend, one, lambda job_id, state: None)  # run, wake, repro
            done = await batch.run_plan(backend, many, lambda event: None)  # matrix
    assert single.status is Status.PASSED and {r.status for r in done.values()} == {Status.PASSED}
    assert sorted(seen) == [("adhoc", "single", [marker]), ("b", "m1", [marker]), ("b", "m2", [marker])]
    # The single job's scenario is kept with it, as every job's is: a later wake uses the copy.
    assert (home.job("adhoc", "single").root / "scenario.toml").is_file()


@pytest.mark.anyio
async def test_a_single_job_on_an_image_not_in_the_engine_is_one_line_before_any_folder(
    tmp_path: Path,
) -> None:
    from flower_batch.errors import FlowerBatchError

    home = Home(tmp_path / "home")
    plan = BatchPlan(
        home, "adhoc", ((_job(tmp_path, "single"), None),), PinnedImage("sha256:" + "0" * 64, {})
    )
    async with FakeBackend() as backend:
        with pytest.raises(FlowerBatchError, match="is not in the Docker engine"):
            await batch.run_one(backend, plan, lambda job_id, state: None)
    assert not home.job("adhoc", "single").root.exists()


def test_no_command_builds_a_job_context_or_a_gateway() -> None:
    """The job's context and its gateway are made in running/scheduler.py only."""
    makers = {"JobContext", "GatewaySidecar"}
    found = []
    for path in sorted((REPO / "flower_batch").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in makers:
                found.append((path.relative_to(REPO).as_posix(), node.func.id))
    assert sorted(found) == [
        ("flower_batch/running/scheduler.py", "GatewaySidecar"),
        ("flower_batch/running/scheduler.py", "JobContext"),
    ]
