"""The contracts between flower's layers, in one place.

A layer that needs something from another names it here instead of typing it `Any`, and
without importing the implementation (a workflow drives any `StepRunner`, not only Runtime;
the terminal talks to any `PersonChannel`). The implementations: `flower.runtime.engine.Runtime`
(StepRunner, Interruptible), `flower.starter.channel.HumanChannel` (PersonChannel),
`flower.context.workbench.Workbench` (WorkbenchLike); an `EventSink` is any function taking
``(kind, payload)`` — the events and their payloads are listed in `flower.events`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from flower.result import StepResult
    from flower.spec import AgentSpec

EventSink = Callable[[str, dict[str, Any]], Any]  # (kind, payload); may return an awaitable
SessionHook = Callable[[str, str], None]  # (step name, session id), the moment the id is known


class WorkbenchLike(Protocol):
    """A directory for scripts, artifacts and notes; `os.fspath()` gives its root, `prompt_block()`
    the lines that tell an agent (a coordinator's worker too) where it is."""

    @property
    def notes(self) -> Path: ...

    def __fspath__(self) -> str: ...

    def prompt_block(self) -> str: ...


class PersonChannel(Protocol):
    """The person on the other side: the agent's questions and inbox, the terminal's answers."""

    on_event: EventSink | None
    timeout_s: float

    @property
    def tool_names(self) -> list[str]: ...

    def mcp_servers(self) -> dict[str, Any]: ...

    async def ask(self, question: str, *, timeout_s: float | None = None) -> str | None: ...

    def amend(self, text: str) -> str | None: ...

    @property
    def pending(self) -> str | None: ...

    def answer(self, text: str) -> bool: ...

    def decline(self) -> bool: ...

    def deliver(self, text: str) -> str: ...


class StepRunner(Protocol):
    """What a Workflow (and a judge) needs of the runtime: run one step as one session."""

    workspace: Path
    run_dir: Path
    results: list[StepResult]
    on_session: SessionHook | None

    def has_session(self, session_id: str) -> bool: ...

    async def run(
        self,
        spec: AgentSpec,
        prompt: str,
        *,
        step_name: str | None = None,
        resume: str | None = None,
        fork: bool = False,
        resume_at: str | None = None,
        on_event: EventSink | None = None,
    ) -> StepResult: ...


class Interruptible(Protocol):
    """What the signal handlers need of the runtime: interrupt, rescue or abandon the step."""

    run_dir: Path

    @property
    def interrupting(self) -> bool: ...

    def interrupt(self, message: str | Callable[[], Any] = "") -> bool: ...

    def rescue(self, error: str = "killed-by-signal") -> None: ...

    def abandon(self) -> None: ...
