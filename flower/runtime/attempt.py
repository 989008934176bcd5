"""One CLI process's messages as an explicit state machine.

A step's attempt reads the CLI's messages until it has a result. Normally that is the first
result message (`Phase.WORK`). When the context fills up and handoff is on, the runtime
interrupts the session (`Phase.DUE`), then asks the same session for its handoff document
(`Phase.WRITING`); the document's reply ends the attempt, and a fresh successor takes over.

At the deadline (flower.runtime.limits) the runtime interrupts the turn (`Phase.TIME_UP`), then
asks the same session for its notes (`Phase.WRAPPING`); the notes' reply, or the end of the
wrap-up window, ends the attempt as timed out::

    WORK/DUE --deadline, interrupt sent--> TIME_UP --interrupt landed--> WRAPPING --notes--> timed out

::

    WORK --context full, interrupt sent--> DUE --our interrupt landed--> WRITING --reply--> handed over
      \\________________________ a result (not a background subagent's wake-up) ________/--> done

`Attempt` is what one CLI process produced; `AttemptState` the bookkeeping while it runs;
`conclude()` turns the final state into the Attempt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeSDKClient, ResultMessage

from flower.catalogue.runtime import LIMITS_TIMED_OUT
from flower.runtime.background import Background
from flower.runtime.turns import send


class Phase(Enum):
    """Where an attempt is, with respect to handing over a full context."""

    WORK = "work"  # doing the task
    DUE = "due"  # the context is full: our interrupt is on its way
    WRITING = "writing"  # the session was asked for its handoff document
    TIME_UP = "time-up"  # the deadline passed: our interrupt is on its way
    WRAPPING = "wrapping"  # the session was asked for its notes before it stops


@dataclass
class Attempt:
    """What one CLI process produced; several may make up one StepResult."""

    ok: bool = False
    error: str | None = None
    api_error_status: int | None = None
    terminal_reason: str | None = None
    cost_usd: float = 0.0
    num_turns: int = 0
    text: str = ""
    context: int = 0
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    model: str = ""
    handoff_doc: Path | None = None  # set when this process ended by handing over
    internal: bool = False  # a bug on our side, not the infrastructure's: never retried
    timed_out: bool = False  # the deadline ended it: never retried, never handed over
    notes_doc: Path | None = None  # the notes written when the time was up


@dataclass
class AttemptState:
    """The bookkeeping of one attempt while its messages arrive."""

    got: Attempt = field(default_factory=Attempt)
    phase: Phase = Phase.WORK
    texts: dict[str, list[str]] = field(default_factory=dict)  # message id -> its text blocks
    last_text_id: str = ""  # the main thread's latest message with text: the step's answer
    synthetic: str | None = None  # the text of an API-error message the CLI made up
    background: Background = field(default_factory=Background)
    final: ResultMessage | None = None
    warned: bool = False  # the context warning was shown
    work_text: str = ""  # the work's answer, kept while the handoff document is written
    asked_at: float = 0.0  # when the document was asked for
    wrap_expired: bool = False  # the wrap-up window after the deadline is over
    sent: str = ""  # the uuid of the latest prompt sent (flower.runtime.turns)
    answered: bool = False  # a result of the turn that took it in has arrived

    def add_text(self, key: str, text: str) -> None:
        self.texts.setdefault(key, []).append(text)
        self.last_text_id = key

    async def prompt(self, client: ClaudeSDKClient, text: str) -> None:
        """Send a prompt; its turn's result is the next one that counts (flower.runtime.turns)."""
        self.sent, self.answered = await send(client, text), False

    def last_reply(self) -> str:
        """The latest main-thread message's text, left in place."""
        return "".join(self.texts[self.last_text_id]) if self.last_text_id else ""

    def take_text(self) -> str:
        """The latest main-thread message's text; the next text starts a new answer."""
        text = "".join(self.texts[self.last_text_id]) if self.last_text_id else ""
        self.last_text_id = ""
        return text


def conclude(state: AttemptState) -> Attempt:
    """The Attempt once the messages stopped (normally, by an error, or by a handover)."""
    got = state.got
    if got.timed_out:
        got.ok, got.handoff_doc = False, None
        got.text = state.work_text or (state.take_text() if state.last_text_id else got.text)
        notes = f"; notes in {got.notes_doc}" if got.notes_doc is not None else ""
        got.error = LIMITS_TIMED_OUT + notes
        return got
    if got.handoff_doc is not None:
        got.error = None
        return got
    if state.phase is Phase.WRITING:
        state.last_text_id = ""  # the document attempt failed: the step's text is the work's
        got.text = state.work_text
    if state.last_text_id:
        got.text = state.take_text()
    final = state.final
    if final is not None and got.error is None:
        got.api_error_status = final.api_error_status
        got.terminal_reason = final.terminal_reason
        if final.is_error:
            got.error = state.synthetic or final.result or "; ".join(final.errors or []) or final.subtype
        else:
            got.ok = True
    elif got.error is None:
        got.error = state.synthetic or "the CLI ended without a result"
    return got
