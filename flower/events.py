"""What flower reports while it works: one small frozen dataclass per event kind, and `Event`.

On the wire an event is still ``(kind, payload)`` — the `on_event` hooks of `Runtime.run`,
`Workflow.run` and `HumanChannel` keep their public shape — but inside flower it is typed:
producers build an event and send `event.kind, event.payload()`; consumers (the display, the
`flower go` printer) turn what they receive back into one with `parse()` and `match` on it.

=================  ===========================  =====================================================
kind               class                        sent by
=================  ===========================  =====================================================
step               StepStarted                  Workflow: a step begins (index/total, resumed, woke)
session            SessionKnown                 Runtime: the step's session id is known
text               AssistantText                Runtime: the main thread said something
tool               ToolCalled                   Runtime: the main thread called a tool
retry              Retried                      Runtime: an infrastructure failure, trying again
offline            Offline                      Runtime: the endpoint is unreachable, waiting
interrupted        Interrupted                  Runtime: one Ctrl-C, continuing with a word
context-warn       ContextWarning               Runtime: the context nears the handoff line
handoff-due        HandoffDue                   Runtime: the context is full, writing a document
handoff            HandedOver                   Runtime: a fresh session took over
handoff-degraded   HandoffDegraded              Runtime: the session could not write it; we did
limits             LimitsTold                   Runtime: the agent was told its time/budget left
time-up            TimeUp                       Runtime: the deadline passed, the agent writes notes
frozen             Frozen                       starter flow: a settled step is skipped
goal               GoalSet                      starter flow: 目标.md was written
judge              Judging                      starter flow: an independent judge starts
verdict            Judged                       starter flow: the judge's verdict
warn               Warned                       starter flow: something the person should know
ask                Asked                        HumanChannel: the agent asks the person
answer             Answered                     HumanChannel: how the question ended
=================  ===========================  =====================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


@dataclass(frozen=True)
class _Event:
    kind: ClassVar[str]

    def payload(self) -> dict[str, Any]:
        """The wire form: the fields by name, the very objects (no copies)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class StepStarted(_Event):
    kind: ClassVar[str] = "step"
    name: str
    index: int
    total: int
    resumed: bool = False
    woke: int = 0


@dataclass(frozen=True)
class SessionKnown(_Event):
    kind: ClassVar[str] = "session"
    session_id: str


@dataclass(frozen=True)
class AssistantText(_Event):
    kind: ClassVar[str] = "text"
    text: str = ""


@dataclass(frozen=True)
class ToolCalled(_Event):
    kind: ClassVar[str] = "tool"
    name: str
    input: Any = None


@dataclass(frozen=True)
class Retried(_Event):
    kind: ClassVar[str] = "retry"
    attempt: int
    error_kind: str  # "transient" | "unknown" (payload key "kind")
    error: str | None = None

    def payload(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "kind": self.error_kind, "error": self.error}


@dataclass(frozen=True)
class Offline(_Event):
    kind: ClassVar[str] = "offline"
    host: str
    port: int
    via: str | None = None
    """The unix socket host:port is relayed to (model_socket.py), when there is one."""


@dataclass(frozen=True)
class Interrupted(_Event):
    kind: ClassVar[str] = "interrupted"
    message: str = ""


@dataclass(frozen=True)
class ContextWarning(_Event):
    kind: ClassVar[str] = "context-warn"
    context: int
    at: int


@dataclass(frozen=True)
class HandoffDue(_Event):
    kind: ClassVar[str] = "handoff-due"
    context: int
    at: int


@dataclass(frozen=True)
class LimitsTold(_Event):
    kind: ClassVar[str] = "limits"
    text: str  # what the agent was told, in the workflow's wording
    summary: str = ""  # the same limits as the person reads them (runtime.limits.limits_summary)


@dataclass(frozen=True)
class TimeUp(_Event):
    kind: ClassVar[str] = "time-up"
    notes: str
    wrap_up_s: float


@dataclass(frozen=True)
class HandedOver(_Event):
    kind: ClassVar[str] = "handoff"
    doc: str
    retiring: str | None
    generation: int


@dataclass(frozen=True)
class HandoffDegraded(_Event):
    kind: ClassVar[str] = "handoff-degraded"
    error: str | None = None


@dataclass(frozen=True)
class Frozen(_Event):
    kind: ClassVar[str] = "frozen"
    name: str
    path: str


@dataclass(frozen=True)
class GoalSet(_Event):
    kind: ClassVar[str] = "goal"
    path: str
    statement: str
    checks: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Judging(_Event):
    kind: ClassVar[str] = "judge"
    name: str


@dataclass(frozen=True)
class Judged(_Event):
    kind: ClassVar[str] = "verdict"
    name: str
    state: str
    reason: str = ""
    missing: list[str] = field(default_factory=list)
    note: str = ""
    round: int = 0
    rounds: int = 0


@dataclass(frozen=True)
class Warned(_Event):
    kind: ClassVar[str] = "warn"
    message: str


@dataclass(frozen=True)
class Asked(_Event):
    kind: ClassVar[str] = "ask"
    question: str
    index: int = 0
    timeout_s: float = 0.0


@dataclass(frozen=True)
class Answered(_Event):
    kind: ClassVar[str] = "answer"
    question: str = ""
    index: int = 0
    status: str = ""
    answer: str | None = None


Event = (
    StepStarted
    | SessionKnown
    | AssistantText
    | ToolCalled
    | Retried
    | Offline
    | Interrupted
    | ContextWarning
    | HandoffDue
    | LimitsTold
    | TimeUp
    | HandedOver
    | HandoffDegraded
    | Frozen
    | GoalSet
    | Judging
    | Judged
    | Warned
    | Asked
    | Answered
)

KINDS: dict[str, type[_Event]] = {
    cls.kind: cls
    for cls in (
        StepStarted,
        SessionKnown,
        AssistantText,
        ToolCalled,
        Retried,
        Offline,
        Interrupted,
        ContextWarning,
        HandoffDue,
        LimitsTold,
        TimeUp,
        HandedOver,
        HandoffDegraded,
        Frozen,
        GoalSet,
        Judging,
        Judged,
        Warned,
        Asked,
        Answered,
    )
}


def parse(kind: str, payload: dict[str, Any]) -> Event | None:
    """The typed event for ``(kind, payload)``; None for a kind flower does not send. Keys the
    class does not know are ignored; keys it lacks take the field's default."""
    cls = KINDS.get(kind)
    if cls is None:
        return None
    given = dict(payload)
    if cls is Retried:
        given["error_kind"] = given.pop("kind", "")
    names = {f.name for f in fields(cls)}
    event: Event = cls(**{k: v for k, v in given.items() if k in names})  # type: ignore[assignment]
    return event
