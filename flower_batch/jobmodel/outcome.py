"""What happened to a job: `Status`, `StepSummary`, `JobOutcome`, and the pass rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .classes import FailureClass, class_from_status, parse_class
from .grading import Reward
from .modes import DEFAULT_MODE, GatewayMode, parse_mode
from .status import Status


def decide_status(
    *,
    workflow_ok: bool | None,
    check_exit: int | None,
    timed_out: bool = False,
    over_budget: bool = False,
    error: str | None = None,
) -> tuple[Status, str | None]:
    """The status and a one-line reason (None when passed). Pass = workflow ok and check exit 0."""
    if error:
        return Status.ERROR, error
    if timed_out:
        return Status.TIMEOUT, "stopped at the job's timeout"
    if over_budget:
        return Status.BUDGET, "stopped by the budget"
    if workflow_ok is None:
        return Status.ERROR, "the workflow ended without a result"
    if not workflow_ok:
        return Status.FAILED, "the workflow reported failure"
    if check_exit is not None and check_exit != 0:
        return Status.FAILED, f"check exited {check_exit}"
    return Status.PASSED, None


@dataclass(frozen=True)
class StepSummary:
    """One step attempt of the workflow (a manifest row, condensed)."""

    name: str
    ok: bool
    cost_usd: float | None = None
    num_turns: int | None = None
    duration_s: float | None = None
    error: str | None = None
    verdict: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "cost_usd": self.cost_usd,
            "num_turns": self.num_turns,
            "duration_s": self.duration_s,
            "error": self.error,
            "verdict": self.verdict,
        }

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> StepSummary:
        """Accepts our own dicts and flower manifest rows (`step`, `ok`, `cost_usd`, ...)."""
        return cls(
            name=str(row.get("name") or row.get("step") or "?"),
            ok=bool(row.get("ok")),
            cost_usd=_float(row.get("cost_usd")),
            num_turns=_int(row.get("num_turns")),
            duration_s=_float(row.get("duration_s")),
            error=row.get("error") or None,
            verdict=row.get("verdict") or None,
        )


@dataclass(frozen=True)
class JobOutcome:
    """The result of one job, as the reports need it. `cost_usd` None = unknown."""

    job_id: str
    status: Status
    workflow_ok: bool | None = None
    check_exit: int | None = None
    cost_usd: float | None = None
    num_turns: int | None = None
    duration_s: float | None = None
    steps: tuple[StepSummary, ...] = ()
    gateway_mode: GatewayMode = DEFAULT_MODE
    reason: str | None = None
    check_output: str | None = None
    log_tail: str | None = None
    failure_class: str | None = None
    """A FailureClass value (jobmodel/classes.py) when the runner knew the cause; else see `klass`."""
    reward: Reward | None = None
    """What the task's verifier wrote (grading.py); None: no verifier, or it wrote nothing valid."""

    def __post_init__(self) -> None:
        # A word from a file or a caller: the enum, or ValueError.
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "gateway_mode", GatewayMode(self.gateway_mode))

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    @property
    def klass(self) -> FailureClass:
        """The job's one failure class: the runner's, else what the status implies."""

        return parse_class(self.failure_class) or class_from_status(self.status, self.check_exit)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "status": self.status.value,
            "workflow_ok": self.workflow_ok,
            "check_exit": self.check_exit,
            "cost_usd": self.cost_usd,
            "num_turns": self.num_turns,
            "duration_s": self.duration_s,
            "steps": [s.to_dict() for s in self.steps],
            "gateway_mode": self.gateway_mode.value,
            "reason": self.reason,
            "check_output": self.check_output,
            "log_tail": self.log_tail,
            "class": self.klass.value,
            **({"reward": self.reward.to_dict()} if self.reward else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobOutcome:
        return cls(
            job_id=data["job_id"],
            status=Status(data["status"]),
            workflow_ok=data.get("workflow_ok"),
            check_exit=_int(data.get("check_exit")),
            cost_usd=_float(data.get("cost_usd")),
            num_turns=_int(data.get("num_turns")),
            duration_s=_float(data.get("duration_s")),
            steps=tuple(StepSummary.from_dict(s) for s in data.get("steps") or ()),
            gateway_mode=parse_mode(data.get("gateway_mode")) or DEFAULT_MODE,
            reason=data.get("reason"),
            check_output=data.get("check_output"),
            log_tail=data.get("log_tail"),
            failure_class=data.get("class"),
            reward=Reward.from_dict(data["reward"]) if data.get("reward") else None,
        )


def steps_from_manifest(rows: Sequence[Mapping[str, Any]]) -> tuple[StepSummary, ...]:
    """Condense flower manifest.json rows into step summaries, in file order."""
    return tuple(StepSummary.from_dict(row) for row in rows)


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None
