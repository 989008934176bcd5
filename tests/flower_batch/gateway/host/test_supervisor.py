"""The gateway supervisor (gateway/host/supervisor.py) on the in-memory backend: a gateway that dies
is started again in place (same container, alias and secret) or created again when it was
removed; one that keeps dying is given up with its reason, and the job it served is stopped
with a record that says why. The real engine and the real CLI: tests/flower_batch/gateway/test_modes_on_docker.py."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from flower_batch.gateway.host.health import GatewayDeath, describe_health
from flower_batch.gateway.host.sidecar import (
    ALIAS,
    MEMORY_ENV,
    READY_LINE,
    GatewaySettings,
    GatewaySidecar,
    gateway_memory,
)
from flower_batch.gateway.host.supervisor import RESTARTS_ENV, RestartPolicy, supervisors
from flower_batch.gateway.tokens import SECRET_ENV
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.spec import GatewaySpec, JobSpec
from tests.fake_backend import FakeBackend, FakeProcess, Script, starts_in_order

FAST = RestartPolicy(max_restarts=2, window_s=600, backoff_s=0.01, backoff_max_s=0.02)


def _sidecar(backend: FakeBackend, tmp_path: Path, settings: GatewaySettings | None = None) -> GatewaySidecar:
    scenario = tmp_path / "s.toml"
    scenario.write_text('[[rules]]\nreply = "hi"\n')
    gw = GatewaySidecar(
        backend,
        batch="b",
        lease="s1",
        image_id=FakeBackend.IMAGE,
        batch_dir=tmp_path / "b",
        gateway=GatewaySpec(mode="scripted", scenario=scenario),
        settings=settings,
    )
    gw.policy = FAST
    return gw


async def _until(what: str, predicate, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.01)


async def serving(proc: FakeProcess) -> int:
    proc.log(f"{READY_LINE} on 0.0.0.0:8080 mode=scripted")
    await anyio.sleep(3600)
    return 0


@pytest.mark.anyio
async def test_a_killed_gateway_is_started_again_in_place(tmp_path: Path) -> None:
    async with FakeBackend(programs={"python": serving}) as backend:
        async with _sidecar(backend, tmp_path) as gw, supervisors() as supervise:
            supervise(gw)
            first = gw.container
            assert first
            await backend.signal(first, "SIGKILL")  # what `docker kill` does
            await _until("a restart", lambda: gw.health.deaths and gw.health.deaths[-1].restarted)
            info = await backend.inspect(first)
            assert info.state == "running" and gw.container == first  # the same container: alias, env, id
            death = gw.health.deaths[0]
            assert death.exit_code == 137 and not death.oom_killed
            assert "killed" in death.cause()
            health = gw.health.for_job(0)
            assert health and health["restarts"] == 1 and health["gave_up"] is None
            assert gw.health.for_job(gw.health.mark()) is None  # a job that started after it: nothing
            assert not gw.gave_up.is_set()


@pytest.mark.anyio
async def test_a_removed_gateway_is_created_again_with_the_same_alias_and_secret(tmp_path: Path) -> None:
    async with FakeBackend(programs={"python": serving}) as backend:
        async with _sidecar(backend, tmp_path) as gw, supervisors() as supervise:
            supervise(gw)
            first = gw.container
            assert first
            secret = backend.process(first).env[SECRET_ENV]
            await backend.remove(first, force=True)  # `docker rm -f`
            await _until(
                "a new gateway",
                lambda: (
                    gw.container not in (None, first) and gw.health.deaths and gw.health.deaths[-1].restarted
                ),
            )
            assert gw.container
            proc = backend.process(gw.container)
            assert proc.env[SECRET_ENV] == secret and proc.spec.network_aliases == [ALIAS]
            assert proc.spec.network == gw.network
            # killed by the removal (seen before it went) or already gone
            assert gw.health.deaths[0].exit_code in (137, None)


@pytest.mark.anyio
async def test_a_gateway_that_keeps_dying_is_given_up_with_its_reason(tmp_path: Path) -> None:
    async def crashing(proc: FakeProcess) -> int:
        proc.log(f"{READY_LINE} on 0.0.0.0:8080 mode=scripted")
        await anyio.sleep(0.05)
        proc.log("MemoryError: the request log outgrew the container")
        return 1

    async with FakeBackend(programs={"python": crashing}) as backend:
        async with _sidecar(backend, tmp_path) as gw, supervisors() as supervise:
            supervise(gw)
            with anyio.fail_after(10):
                await gw.gave_up.wait()
            deaths = gw.health.deaths
            assert len(deaths) == FAST.max_restarts + 1
            assert [d.restarted for d in deaths] == [True] * FAST.max_restarts + [False]
            reason = gw.health.gave_up or ""
            assert "kept dying" in reason and "exited 1" in reason and "MemoryError" in reason
            health = gw.health.for_job(0)
            assert health and health["gave_up"] == reason and health["restarts"] == FAST.max_restarts
            assert describe_health(health) == reason


@pytest.mark.anyio
async def test_the_job_of_a_gateway_given_up_is_stopped_and_its_record_says_why(tmp_path: Path) -> None:
    from flower_batch.jobmodel.record import read_record
    from flower_batch.layout import Home
    from flower_batch.running.runner import JobContext, run_job

    async def crashing(proc: FakeProcess) -> int:
        proc.log(f"{READY_LINE} on 0.0.0.0:8080 mode=scripted")
        await anyio.sleep(0.3)
        return 137

    job_program = Script(duration_s=3600)  # a job that would wait out flower's offline wait
    async with FakeBackend(programs={"python": crashing, "flower": job_program}) as backend:
        async with _sidecar(backend, tmp_path) as gw, supervisors() as supervise:
            supervise(gw)
            spec = JobSpec(
                id="j1",
                task="t",
                variant="v",
                repeat=1,
                matrix={},
                prompt="hi",
                gateway=GatewaySpec(mode="scripted", scenario=gw.scenario),
            )
            ctx = JobContext(
                backend=backend, batch="b", lease="s1", image=PinnedImage(FakeBackend.IMAGE), gateway=gw
            )
            with anyio.fail_after(20):
                record = await run_job(ctx, spec, Home(tmp_path / "home").job("b", "j1"))
    assert record.status == "error", record
    assert "kept dying" in (record.reason or "") and "exit 137" in (record.reason or "")
    on_disk = read_record(Home(tmp_path / "home").job("b", "j1").record_path)
    assert on_disk.gateway_health and on_disk.gateway_health["gave_up"] == record.reason
    assert len(on_disk.gateway_health["deaths"]) == FAST.max_restarts + 1


@pytest.fixture
def one_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake engine shares no unix socket (its gateway is reached by network), which alone
    keeps a job from starting beside its gateway: as on one machine, the image's label decides."""
    from flower_batch.running import jobs, scheduler

    async def by_label(backend: FakeBackend, image_id: str) -> bool:
        return jobs.relay_waits(await backend.image_info(image_id))

    monkeypatch.setattr(scheduler, "_starts_beside", by_label)


async def _run_one_job(backend: FakeBackend, tmp_path: Path) -> JobRecord:
    """`run` of one scripted job on `backend` (running/batch.run_one), bounded in time."""
    from flower_batch.layout import Home
    from flower_batch.running.batch import run_one
    from flower_batch.running.plan import BatchPlan

    scenario = tmp_path / "s.toml"
    scenario.write_text('[[rules]]\nreply = "hi"\n')
    spec = JobSpec(
        id="j1",
        task="t",
        variant="v",
        repeat=1,
        matrix={},
        prompt="hi",
        gateway=GatewaySpec(mode="scripted", scenario=scenario),
    )
    with anyio.fail_after(20):
        plan = BatchPlan(Home(tmp_path / "home"), "b", ((spec, None),), PinnedImage(FakeBackend.IMAGE, {}))
        return await run_one(backend, plan, lambda job, state: None)


@pytest.mark.anyio
async def test_a_gateway_that_does_not_start_beside_its_job_stops_the_job_with_the_reason(
    tmp_path: Path, one_machine: None
) -> None:
    # run and wake start the gateway while the job's container starts (running/scheduler.py).
    async def broken(proc: FakeProcess) -> int:
        await anyio.sleep(0.2)  # the job's container is created meanwhile
        proc.log("gateway: bad scenario")
        return 2

    async with FakeBackend(programs={"python": broken, "flower": Script(duration_s=3600)}) as backend:
        record = await _run_one_job(backend, tmp_path)
        left = await backend.list_by_label({})
    assert record.status == "error", record
    reason = record.reason or ""
    assert "the gateway did not start" in reason and "bad scenario" in reason, reason
    assert record.container  # the job's container had started: stopped and removed
    assert left == []  # the job's and the gateway's containers are gone


@pytest.mark.anyio
@pytest.mark.parametrize("relay_waits", [True, False])
async def test_the_gateway_starts_beside_the_job_only_on_an_image_whose_relay_waits(
    tmp_path: Path, relay_waits: bool, one_machine: None
) -> None:
    # An image from before flower's relay waited for its socket (a wake of an older job) would
    # lose a request made before the gateway serves: its gateway starts first, as it used to.
    from flower_batch.labels import RELAY_WAITS

    events: list[str] = []
    images = {FakeBackend.IMAGE: {RELAY_WAITS: "1"} if relay_waits else {}}
    async with FakeBackend(programs=starts_in_order(events), images=images) as backend:
        await _run_one_job(backend, tmp_path)
    expected = ["job started", "gateway ready"] if relay_waits else ["gateway ready", "job started"]
    assert events == expected


@pytest.mark.anyio
async def test_on_a_cluster_the_gateway_serves_before_the_job_is_created(tmp_path: Path) -> None:
    # A cluster's job reaches its gateway by name over the overlay, and nothing in the job waits
    # for that name: even with an image whose relay waits, the gateway serves first (its network
    # made, however slow the engine is at it), then the job's service is created.
    from flower_batch.backend.base import ContainerSpec
    from flower_batch.labels import ROLE

    order: list[str] = []

    class SlowNetworks(FakeBackend):
        async def create_network(self, name: str, labels, internal: bool = False) -> str:  # type: ignore[no-untyped-def]
            await anyio.sleep(0.3)
            made = await super().create_network(name, labels, internal)
            order.append(f"network {name}")
            return made

        async def create(self, spec: ContainerSpec) -> str:
            order.append(f"{spec.labels.get(ROLE)} on {spec.network}")
            return await super().create(spec)

    events: list[str] = []
    async with SlowNetworks(programs=starts_in_order(events)) as backend:
        assert not backend.shares_unix_sockets
        await _run_one_job(backend, tmp_path)
    network = next(entry.removeprefix("network ") for entry in order if entry.startswith("network "))
    assert order.index(f"network {network}") < order.index(f"job on {network}"), order
    assert events == ["gateway ready", "job started"]


@pytest.mark.anyio
async def test_a_log_read_the_engine_leaves_open_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seen on a loaded engine: a non-follow log read racing the ready line's write never ended.
    from collections.abc import AsyncIterator

    from flower_batch.gateway.host import sidecar

    monkeypatch.setattr(sidecar, "LOG_READ_S", 0.2)

    class Hanging(FakeBackend):
        reads = 0

        async def logs(self, container_id: str, follow: bool = False) -> AsyncIterator[str]:
            Hanging.reads += 1
            if Hanging.reads == 1:
                await anyio.sleep_forever()
            async for line in super().logs(container_id, follow):
                yield line

    async with Hanging(programs={"python": serving}) as backend:
        with anyio.fail_after(10):
            async with _sidecar(backend, tmp_path) as gw:
                assert gw.serving and Hanging.reads >= 2


def test_death_causes_read_as_people_expect() -> None:
    assert GatewayDeath("t", 0, 137, oom_killed=True).cause() == "the gateway was OOM-killed (exit 137)"
    assert GatewayDeath("t", 0, 2, log_tail=("x", "gateway: bad scenario", "")).cause() == (
        "the gateway exited 2; last log: gateway: bad scenario"
    )
    assert describe_health(None) == "no gateway restarts"


def test_the_restart_limit_comes_from_the_environment() -> None:
    from flower_batch.errors import FlowerBatchError

    assert RestartPolicy.from_env({}).max_restarts == 5
    assert RestartPolicy.from_env({RESTARTS_ENV: "0"}).max_restarts == 0
    with pytest.raises(FlowerBatchError, match=RESTARTS_ENV):
        RestartPolicy.from_env({RESTARTS_ENV: "lots"})
    assert RestartPolicy().delay(1) == 0.5 and RestartPolicy().delay(10) == 10.0


def test_the_gateway_memory_limit_comes_from_the_environment() -> None:
    from flower_batch.errors import FlowerBatchError

    assert gateway_memory({}) == 512 * 1024 * 1024
    assert gateway_memory({MEMORY_ENV: "2g"}) == 2 * 1024**3
    for bad in ("lots", "1k", "0"):
        with pytest.raises(FlowerBatchError, match=MEMORY_ENV):
            gateway_memory({MEMORY_ENV: bad})


@pytest.mark.anyio
async def test_the_gateway_container_gets_the_memory_limit_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = GatewaySettings.from_environ({MEMORY_ENV: "96m"})  # as a command reads its environment
    async with FakeBackend(programs={"python": serving}) as backend:
        async with _sidecar(backend, tmp_path, settings) as gw:
            assert gw.container
            assert backend._containers[gw.container].spec.memory == 96 * 1024 * 1024


def test_a_restarted_gateway_continues_the_meter_and_the_batch_budget(tmp_path: Path) -> None:
    """What a restarted gateway process does with a job's meter files: it reads them back and
    goes on under fresh exchange ids, so no exchange is counted twice and no budget forgets."""
    from flower_batch.gateway.budget import Budgets
    from flower_batch.gateway.metering import JobMeter, read_meter

    logs = tmp_path / "b" / "j1" / "logs"
    usage = {"input_tokens": 1000, "output_tokens": 100}
    first = JobMeter(logs, "j1", "scripted")  # the gateway before it was killed
    ex = first.new_exchange()
    first.update(ex, "claude-sonnet-4-5", usage, final=True)
    cut = first.new_exchange()
    first.update(
        cut, "claude-sonnet-4-5", {"input_tokens": 1000, "output_tokens": 1}, final=False
    )  # killed here
    one = first.summary().cost_known_usd

    again = JobMeter(logs, "j1", "scripted")  # the restarted gateway's meter of the same job
    assert again.summary().exchanges == 2 and again.summary().incomplete == 1
    retry = again.new_exchange()
    assert retry not in (ex, cut)
    again.update(retry, "claude-sonnet-4-5", usage, final=True)
    summary = again.summary()
    assert summary.exchanges == 3 and summary.tokens["input_tokens"] == 3000
    assert summary.tokens["output_tokens"] == 201
    assert read_meter(logs) is not None and read_meter(logs).tokens == summary.tokens  # type: ignore[union-attr]
    # the batch budget sees the spend of both lives of the gateway
    spent = summary.cost_known_usd
    assert spent > one
    assert Budgets(tmp_path / "b", batch_budget_usd=spent).refusal("j1", {"j1": summary}) is not None
    assert Budgets(tmp_path / "b", batch_budget_usd=spent * 1.01).refusal("j1", {"j1": summary}) is None
