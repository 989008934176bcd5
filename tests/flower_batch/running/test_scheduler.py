"""The scheduler when a job's gateway cannot start: every job ends `error` with a record, and an
earlier verdict survives until its job starts (FakeBackend, no Docker)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from flower_batch.jobmodel.image import PinnedImage
from flower_batch.running.plan import BatchPlan


def _spec(job_id: str, mode: str = "anthropic"):
    from flower_batch.jobmodel.spec import GatewaySpec, JobSpec

    return JobSpec(
        id=job_id, task="t", variant="v", repeat=1, matrix={}, prompt="hi", gateway=GatewaySpec(mode=mode)
    )


@pytest.mark.anyio
async def test_a_job_whose_gateway_cannot_start_ends_error_and_earlier_verdicts_survive_until_start(
    tmp_path: Path, monkeypatch
) -> None:
    """No ANTHROPIC_API_KEY: each job's gateway fails. That must not crash the batch (no
    ExceptionGroup) nor leave `queued` records; and a job with an earlier finished record keeps it
    until the job itself is started."""
    from flower_batch.jobmodel.outcome import JobOutcome
    from flower_batch.jobmodel.record import new_record, read_record, write_record
    from flower_batch.jobmodel.status import Status
    from flower_batch.layout import Home
    from flower_batch.running.plan import BatchPlan
    from flower_batch.running.scheduler import run_jobs
    from tests.fake_backend import FakeBackend

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = Home(tmp_path / "home")
    first, second = _spec("first"), _spec("second")
    old = new_record(second, batch="b", image_id="sha256:img", attempt=1).with_outcome(
        JobOutcome(job_id="second", status=Status.PASSED, gateway_mode="anthropic"),
        finished_at="2026-01-01T00:00:00+00:00",
    )
    write_record(home.job("b", "second").record_path, old)
    seen: dict[str, str] = {}

    def on_state(job_id: str, state: str) -> None:
        if job_id == "first" and state == "error":
            seen["second"] = read_record(home.job("b", "second").record_path).status

    async with FakeBackend() as backend:
        done = await run_jobs(
            backend,
            BatchPlan(home, "b", [(first, None), (second, old)], PinnedImage("sha256:img", {}), parallel=1),
            on_state,
        )
    assert seen == {"second": "passed"}  # not overwritten by `queued` before it started
    for job_id in ("first", "second"):
        record = read_record(home.job("b", job_id).record_path)
        assert record.status == "error" and done[job_id].status == "error"
        assert "ANTHROPIC_API_KEY" in (record.reason or "")
    assert read_record(home.job("b", "second").record_path).attempt == 2


@pytest.mark.anyio
async def test_a_paused_job_stays_paused_while_capped_or_when_its_wake_cannot_start(
    tmp_path: Path, monkeypatch
) -> None:
    """A paused job to continue (issue 20): with the batch's cap still spent it is left as it is,
    nothing started; when its wake cannot be set up (here: its gateway) it stays paused, its
    session where it was, and its reason says why it was not continued."""
    from dataclasses import replace

    from flower_batch.gateway.metering import JobMeter
    from flower_batch.jobmodel.outcome import JobOutcome
    from flower_batch.jobmodel.record import new_record, read_record, write_record
    from flower_batch.jobmodel.status import Status
    from flower_batch.layout import Home
    from flower_batch.running.scheduler import run_jobs
    from tests.fake_backend import FakeBackend

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = Home(tmp_path / "home")
    job = replace(_spec("long"), persistent=True)
    jd = home.job("b", "long")
    paused = new_record(job, batch="b", image_id="sha256:img", attempt=1).with_outcome(
        JobOutcome(
            job_id="long", status=Status.PAUSED, gateway_mode="anthropic", reason="batch budget reached"
        ),
        finished_at="2026-01-01T00:00:00+00:00",
    )
    write_record(jd.record_path, paused)
    (jd.runs).mkdir(parents=True)
    (jd.runs / "sessions.db").write_bytes(b"the conversation")
    meter = JobMeter(jd.logs, "long", "anthropic")
    meter.update(meter.new_exchange(), "claude-sonnet-4-5", {"input_tokens": 10_000}, final=True)  # $0.03
    states: list[str] = []

    async def go(budget: float) -> None:
        async with FakeBackend() as backend:
            await run_jobs(backend, BatchPlan(home, "b", [(job, paused)], PinnedImage("sha256:img", {}), parallel=1, budget_usd=budget, wake=frozenset({"long"})), lambda _job, state: states.append(state))  # fmt: skip

    before = jd.record_path.read_bytes()
    await go(0.02)  # still spent: untouched
    assert jd.record_path.read_bytes() == before and states[-1] == "paused"
    await go(1.0)  # a cap to spend, but no key for its gateway: not continued, still paused
    record = read_record(jd.record_path)
    assert record.status == "paused" and record.attempt == 1
    assert record.reason is not None and record.reason.startswith("batch budget reached; not continued: ")
    assert "ANTHROPIC_API_KEY" in record.reason
    assert (jd.runs / "sessions.db").read_bytes() == b"the conversation" and not (
        jd.root / "attempts"
    ).exists()


async def _matrix_of_two(tmp_path: Path, backend, monkeypatch: pytest.MonkeyPatch, paused=None):
    """Two scripted jobs of one scenario at -j 2 (one gateway), through run_jobs. The fake engine
    shares no unix socket (its gateway is reached by network), which alone keeps a batch's
    gateway from starting beside its jobs: that gate is lifted, the image's label decides."""
    from flower_batch.jobmodel.spec import GatewaySpec, JobSpec
    from flower_batch.layout import Home
    from flower_batch.running import scheduler
    from flower_batch.running.jobs import relay_waits
    from flower_batch.running.scheduler import run_jobs
    from tests.fake_backend import FakeBackend

    async def by_label(backend, image_id: str) -> bool:
        return relay_waits(await backend.image_info(image_id))

    monkeypatch.setattr(scheduler, "_starts_beside", by_label)

    scenario = tmp_path / "s.toml"
    scenario.write_text('[[rules]]\nreply = "hi"\n')
    jobs = [
        JobSpec(id=f"j{i}", task="t", variant="v", repeat=1, matrix={}, prompt="hi",
                gateway=GatewaySpec(mode="scripted", scenario=scenario))
        for i in (1, 2)
    ]  # fmt: skip
    home = Home(tmp_path / "home")
    with anyio.fail_after(20):
        done = await run_jobs(
            backend,
            BatchPlan(
                home,
                "b",
                [(job, paused if paused and paused.job_id == job.id else None) for job in jobs],
                PinnedImage(FakeBackend.IMAGE, {}),
                parallel=2,
                wake=frozenset({paused.job_id} if paused else ()),
            ),
        )
    return done, await backend.list_by_label({})


@pytest.mark.anyio
@pytest.mark.parametrize("relay_waits", [True, False])
async def test_a_batchs_first_jobs_start_while_their_gateway_does_on_an_image_whose_relay_waits(
    tmp_path: Path, relay_waits: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One machine: the first jobs' containers start beside the gateway (about 0.4 s of every
    # matrix's start); an image whose flower does not wait for its socket keeps the old order.
    from flower_batch.labels import RELAY_WAITS
    from tests.fake_backend import FakeBackend, starts_in_order

    events: list[str] = []
    images = {FakeBackend.IMAGE: {RELAY_WAITS: "1"} if relay_waits else {}}
    async with FakeBackend(programs=starts_in_order(events), images=images) as backend:
        _, left = await _matrix_of_two(tmp_path, backend, monkeypatch)
    starts = ["job started", "job started"]
    assert events == (starts + ["gateway ready"] if relay_waits else ["gateway ready"] + starts)
    assert left == []  # the gateway is stopped with the batch


@pytest.mark.anyio
async def test_a_gateway_that_does_not_start_beside_a_batchs_jobs_ends_each_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flower_batch.labels import RELAY_WAITS
    from tests.fake_backend import FakeBackend, FakeProcess, Script

    async def broken(proc: FakeProcess) -> int:
        await anyio.sleep(0.2)  # the jobs' containers are created meanwhile
        proc.log("gateway: bad scenario")
        return 2

    images = {FakeBackend.IMAGE: {RELAY_WAITS: "1"}}
    programs = {"python": broken, "flower": Script(duration_s=3600)}
    async with FakeBackend(programs=programs, images=images) as backend:
        done, left = await _matrix_of_two(tmp_path, backend, monkeypatch)
    for record in done.values():
        assert record.status == "error" and "the gateway did not start" in (record.reason or ""), record
        assert "bad scenario" in (record.reason or "")
    assert left == []  # the jobs' containers were stopped and removed, and the gateway's


@pytest.mark.anyio
async def test_a_paused_jobs_wake_waits_for_a_gateway_starting_beside_and_stays_paused_if_it_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other job starts beside the gateway and ends `error`; the paused one is not started
    # on a gateway that never served: it stays paused, its reason says why.
    from dataclasses import replace

    from flower_batch.jobmodel.outcome import JobOutcome
    from flower_batch.jobmodel.record import new_record
    from flower_batch.jobmodel.spec import GatewaySpec
    from flower_batch.jobmodel.status import Status
    from flower_batch.labels import RELAY_WAITS
    from tests.fake_backend import FakeBackend, FakeProcess, Script

    async def broken(proc: FakeProcess) -> int:
        await anyio.sleep(0.2)
        proc.log("gateway: bad scenario")
        return 2

    scenario = tmp_path / "s.toml"  # the same file _matrix_of_two writes: one gateway for both
    job = replace(
        _spec("j2", mode="scripted"), gateway=GatewaySpec(mode="scripted", scenario=scenario), persistent=True
    )
    paused = new_record(job, batch="b", image_id=FakeBackend.IMAGE, attempt=1).with_outcome(
        JobOutcome(job_id="j2", status=Status.PAUSED, gateway_mode="scripted", reason="budget reached"),
        finished_at="2026-01-01T00:00:00+00:00",
    )
    images = {FakeBackend.IMAGE: {RELAY_WAITS: "1"}}
    programs = {"python": broken, "flower": Script(duration_s=3600)}
    async with FakeBackend(programs=programs, images=images) as backend:
        done, left = await _matrix_of_two(tmp_path, backend, monkeypatch, paused=paused)
    assert done["j1"].status == "error" and "the gateway did not start" in (done["j1"].reason or "")
    woken = done["j2"]
    assert woken.status == "paused" and woken.attempt == 1, woken
    assert (woken.reason or "").startswith("budget reached; not continued: the gateway did not start")
    assert left == []
