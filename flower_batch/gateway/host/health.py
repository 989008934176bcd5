"""A gateway's deaths, as the orchestrator saw them, and how a job's record reports them.

Host side, no flower import. The supervisor (supervisor.py) notes each death of a gateway
container here; every job that was running on that gateway meanwhile gets the deaths in its
record (`gateway_health`), so a job that survived a restart says so, and a job that failed
because its gateway kept dying says why (OOM-killed, exit code, last log lines).

record.json `gateway_health` (absent / null: the gateway never died while the job ran):

    {"gateway": "<container name>", "restarts": 2, "gave_up": null | "<one line>",
     "deaths": [{"at": "<iso time>", "exit_code": 137, "oom_killed": false,
                 "log_tail": ["…"], "restarted": true}, …]}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

LOG_TAIL_LINES = 5


@dataclass(frozen=True)
class GatewayDeath:
    at: str  # wall-clock time (ISO), for people
    t: float  # monotonic seconds, for the restart window
    exit_code: int | None  # None: the container was gone (removed from outside)
    oom_killed: bool = False
    log_tail: tuple[str, ...] = ()
    restarted: bool = False

    def cause(self) -> str:
        """One line: why the gateway died."""
        if self.exit_code is None:
            what = "the gateway container was removed"
        elif self.oom_killed:
            what = f"the gateway was OOM-killed (exit {self.exit_code})"
        elif self.exit_code == 137:
            what = "the gateway was killed (exit 137: SIGKILL, e.g. docker kill)"
        else:
            what = f"the gateway exited {self.exit_code}"
        tail = [line.strip() for line in self.log_tail if line.strip()]
        return what + (f"; last log: {tail[-1][:200]}" if tail else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "exit_code": self.exit_code,
            "oom_killed": self.oom_killed,
            "log_tail": list(self.log_tail),
            "restarted": self.restarted,
        }


@dataclass
class GatewayHealth:
    """What happened to one gateway container over its life (held by its sidecar)."""

    name: str
    deaths: list[GatewayDeath] = field(default_factory=list)
    gave_up: str | None = None  # set once the restart policy is exhausted

    def mark(self) -> int:
        """Where a job starts reading deaths from (see `for_job`)."""
        return len(self.deaths)

    def for_job(self, mark: int) -> dict[str, Any] | None:
        """The record field of a job that ran from `mark` on: deaths meanwhile, and whether the
        supervisor gave up. None when the gateway did not die while the job ran."""
        seen = self.deaths[mark:]
        if not seen and self.gave_up is None:
            return None
        return {
            "gateway": self.name,
            "restarts": sum(d.restarted for d in seen),
            "gave_up": self.gave_up,
            "deaths": [d.to_dict() for d in seen],
        }


def describe_health(health: Mapping[str, Any] | None) -> str:
    """One line for `show`: restarts and the last cause, or that the supervisor gave up."""
    if not health:
        return "no gateway restarts"
    deaths: Sequence[Mapping[str, Any]] = health.get("deaths") or ()
    restarts = int(health.get("restarts") or 0)
    if health.get("gave_up"):
        return str(health["gave_up"])
    last = deaths[-1] if deaths else None
    cause = (
        GatewayDeath(
            at="",
            t=0.0,
            exit_code=last.get("exit_code"),
            oom_killed=bool(last.get("oom_killed")),
            log_tail=tuple(last.get("log_tail") or ()),
        ).cause()
        if last
        else "no cause recorded"
    )
    return f"the gateway was restarted {restarts}× while this job ran (last: {cause})"
