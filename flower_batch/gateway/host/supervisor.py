"""Keep a batch's gateway alive: when its container dies (OOM, `docker kill`, a crash), start it
again on the same network alias with the same batch secret, a bounded number of times.

Why the orchestrator watches instead of Docker's own restart policy: Docker restarts quietly
and does not restart after `docker kill` (it counts as a manual stop), while the orchestrator
must know every death to report it in the records of the jobs it hurt, with its reason
(Docker's State.OOMKilled, the exit code, the last log lines). The container is restarted in
place (`docker start`: same id, same networks and alias, same environment, so the secret never
leaves memory and the container config); one removed from outside is created again from the
spec the sidecar kept in memory.

What carries the jobs over the gap: the CLI's own retries and flower's resilience (probe the
gateway, wait, resume the same session). What keeps the cost exact: metering lives in files
(metering.py) that the restarted gateway continues, under fresh exchange ids.

Policy: at most `max_restarts` deaths within `window_s` are restarted, each after a backoff
(0.5 s doubling, at most 10 s); one more and the supervisor gives up: the gateway is left
dead, every job on it is stopped (their records say why), and no new job is started on it.
`FLOWER_BATCH_GATEWAY_RESTARTS=N` sets max_restarts (0: never restart).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import anyio
import anyio.abc

from flower.clock import now_iso
from flower_batch.backend.base import Backend
from flower_batch.errors import FlowerBatchError
from flower_batch.gateway.host.health import LOG_TAIL_LINES, GatewayDeath, GatewayHealth

RESTARTS_ENV = "FLOWER_BATCH_GATEWAY_RESTARTS"
READY_LINE = "gateway listening"  # the gateway prints it once per life, when it serves


@dataclass(frozen=True)
class RestartPolicy:
    max_restarts: int = 5
    window_s: float = 600.0
    backoff_s: float = 0.5
    backoff_max_s: float = 10.0

    def delay(self, recent: int) -> float:
        """Seconds to wait before restart number `recent` (1-based) of the window."""
        return min(self.backoff_max_s, self.backoff_s * 2.0 ** max(0, recent - 1))

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> RestartPolicy:
        raw = environ.get(RESTARTS_ENV, "").strip()
        if not raw:
            return cls()
        if not raw.isdigit():
            raise FlowerBatchError(
                f"{RESTARTS_ENV}={raw!r}: give the number of gateway restarts allowed in {cls.window_s:.0f} s, e.g. 5"
            )
        return cls(max_restarts=int(raw))


class Supervised(Protocol):
    """What the supervisor needs of a gateway (sidecar.GatewaySidecar is one): its container on
    its engine, how it fared, when to stop watching, and how to start it again."""

    backend: Backend
    container: str | None  # None once it is gone for good
    health: GatewayHealth
    policy: RestartPolicy
    gave_up: anyio.Event  # set here when the restarts run out
    stopping: bool  # set by the sidecar when the batch ends: a death then is no death

    async def restart(self, lives: int | None = None) -> None: ...


async def watch(
    gateway: Supervised, policy: RestartPolicy, *, clock: Callable[[], float] = time.monotonic
) -> None:
    """Until the sidecar stops: wait for its container to end, note the death, restart it."""
    health = gateway.health
    while not gateway.stopping and gateway.container:
        try:
            exited: int | None = await gateway.backend.wait(gateway.container)
        except FlowerBatchError:
            exited = None  # removed from outside: observe() says so
        if gateway.stopping:
            return
        death, lives = await observe(gateway, exited)
        now = clock()
        recent = 1 + sum(1 for d in health.deaths if now - d.t <= policy.window_s)
        if recent > policy.max_restarts:
            health.deaths.append(death)
            health.gave_up = (
                f"the batch's gateway kept dying ({recent} times in {policy.window_s:.0f} s, "
                f"restart limit {policy.max_restarts}): {death.cause()}"
            )
            gateway.gave_up.set()
            return
        await anyio.sleep(policy.delay(recent))
        if gateway.stopping:
            health.deaths.append(death)
            return
        try:
            await gateway.restart(lives=lives)
            restarted = True
        except FlowerBatchError as exc:
            # Counted as this death not restarted; the next wait returns at once and counts again.
            restarted = False
            death = GatewayDeath(
                death.at,
                death.t,
                death.exit_code,
                death.oom_killed,
                (*death.log_tail, f"restart failed: {' '.join(str(exc).split())}"),
            )
        health.deaths.append(
            GatewayDeath(death.at, now, death.exit_code, death.oom_killed, death.log_tail, restarted)
        )
        if not restarted and gateway.container is None:
            health.gave_up = f"the batch's gateway died and could not be started again: {death.cause()}"
            gateway.gave_up.set()
            return


async def observe(gateway: Supervised, exited: int | None = None) -> tuple[GatewayDeath, int]:
    """Exit code, OOMKilled and the last log lines of the gateway container that just ended, and
    how many lives its log shows (ready lines) — None and 0 when it is gone.

    `exited` is the exit code the engine's wait returned: the container may be running already
    (Docker's own restart policy brings back a container that failed, e.g. OOM-killed, but not
    one `docker kill`ed), and then inspect has no exit code of the life that just ended."""
    at = now_iso()
    assert gateway.container
    try:
        info = await gateway.backend.inspect(gateway.container)
        lines = [line async for line in gateway.backend.logs(gateway.container)]
    except FlowerBatchError:
        return GatewayDeath(at=at, t=time.monotonic(), exit_code=None), 0
    code = info.exit_code if info.exit_code is not None else exited
    death = GatewayDeath(
        at=at,
        t=time.monotonic(),
        exit_code=code,
        oom_killed=info.oom_killed,
        log_tail=tuple(lines[-LOG_TAIL_LINES:]),
    )
    return death, sum(READY_LINE in line for line in lines)


@contextlib.asynccontextmanager
async def supervisors() -> AsyncIterator[Callable[[Supervised], None]]:
    """A place for gateway watchers, entered and left by the orchestrator's own task: yields
    `supervise(gateway)`, callable from any task; the watchers end with the block."""
    async with anyio.create_task_group() as tg:

        def supervise(gateway: Supervised) -> None:
            tg.start_soon(watch, gateway, gateway.policy)

        try:
            yield supervise
        finally:
            tg.cancel_scope.cancel()
