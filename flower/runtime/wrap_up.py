"""The job's limits during a step (flower.runtime.limits): what the agent is told, and the
deadline's wrap-up.

Each session starts with the time and budget left in front of its prompt; a PostToolUse hook
passes on the notices as shares are used; at the deadline the turn is interrupted (TIME_UP),
the session is asked for its notes (收尾-<step>.md, WRAPPING) within the wrap-up window, and
the attempt ends timed out. If the session writes none, the runtime writes them itself.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
from claude_agent_sdk import (
    ClaudeSDKClient,
    HookCallback,
    HookContext,
    HookInput,
    HookJSONOutput,
    ResultMessage,
)

from flower.catalogue.names import WRAP_UP_FILE
from flower.catalogue.runtime import WRAP_UP_DEGRADED_DOC
from flower.context.handoff import doc_path
from flower.events import LimitsTold, TimeUp
from flower.result import StepResult
from flower.runtime.attempt import AttemptState, Phase
from flower.runtime.emit import EventHook, emit
from flower.runtime.handover import keep_reply, write_degraded
from flower.runtime.interrupts import safe_interrupt
from flower.runtime.limits import Limits, LimitWatch, limits_summary

REMINDER_OPEN, REMINDER_CLOSE = "<system-reminder>", "</system-reminder>"
HARD_STOP_S = 10.0  # after the wrap-up window, how long an interrupted turn may take to stop


class WrapUp:
    """One Runtime's limits: the watch of shares told, and the spend of this process."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.watch = LimitWatch(limits)
        self.spent_here = 0.0  # what the CLI reported as spent in this process, turn by turn

    @property
    def notices(self) -> bool:
        lim = self.limits
        return lim.notices and lim.active and bool(lim.thresholds)

    def notes_path(self, notes: Path, step: str) -> Path:
        return doc_path(notes, step, WRAP_UP_FILE)

    async def opening(self, notes: Path, step: str, resume: str | None, on_event: EventHook | None) -> str:
        """The limits in front of a session's first prompt ("" when none); on a resume, where
        the notes are that the step wrote when its time was up last time."""
        path = self.notes_path(notes, step)
        now = time.time()
        text = self.watch.opening(now, self.spent_here, path if resume and path.is_file() else None)
        if not text:
            return ""
        await emit(on_event, LimitsTold(text=text, summary=limits_summary(self.limits, now, self.spent_here)))
        # As a system reminder, the way the CLI adds its own context: the words the agent reads,
        # yet not the workflow's prompt (a replay compares prompts; the time left never repeats).
        return f"{REMINDER_OPEN}\n{text}\n{REMINDER_CLOSE}\n\n"

    def hook(self) -> HookCallback:
        """A PostToolUse hook: the notices of shares crossed since the last tool call, as
        additional context (the CLI puts it into its next request to the model). Only the main
        thread's tools: the session that plans the work is the one to tell (a coordinator
        hears it when its Agent call returns)."""

        async def hook(
            input_data: HookInput, tool_use_id: str | None, context: HookContext
        ) -> HookJSONOutput:
            if input_data.get("agent_id"):
                return {}  # a subagent's tool: the notice waits for the main thread's next one
            text = self.watch.check(time.time(), self.spent_here)
            if not text:
                return {}
            return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": text}}

        return hook

    async def deadline(
        self, state: AttemptState, client: ClaudeSDKClient, reading: anyio.CancelScope
    ) -> None:
        """At the deadline, interrupt the turn (TIME_UP); at the end of the wrap-up window,
        interrupt again; if even that turn does not stop, stop reading (the CLI is then closed)."""
        lim = self.limits
        if lim.deadline is None:
            return
        await anyio.sleep(max(0.0, lim.deadline - time.time()))
        if state.phase in (Phase.WORK, Phase.DUE):  # time comes before a pending handoff
            state.phase = Phase.TIME_UP
            await safe_interrupt(client)
        await anyio.sleep(max(0.0, (lim.wrap_up_end() or 0.0) - time.time()))
        state.wrap_expired = True
        await safe_interrupt(client)
        await anyio.sleep(HARD_STOP_S)
        reading.cancel()

    async def time_up(
        self,
        msg: ResultMessage,
        state: AttemptState,
        client: ClaudeSDKClient,
        notes: Path,
        step: str,
        on_event: EventHook | None,
    ) -> bool:
        """A turn ended after the deadline (Phase.TIME_UP). True when the attempt is done."""
        aborted = (msg.terminal_reason or "").startswith("aborted")
        if not aborted:
            state.final = msg  # the turn ended on its own as the time ran out: its result stands
            return True
        if state.wrap_expired or self.limits.wrap_up_s <= 0:
            state.got.timed_out = True
            return True
        state.phase = Phase.WRAPPING
        state.work_text = state.take_text()
        state.asked_at = time.time()
        path = self.notes_path(notes, step)
        await emit(on_event, TimeUp(notes=str(path), wrap_up_s=self.limits.wrap_up_s))
        await state.prompt(client, self.watch.time_up(time.time(), path))
        return False

    def wrapped(self, notes: Path, state: AttemptState, result: StepResult, task: str, reply: str) -> None:
        """The notes' turn ended (or the window did): keep them, end the attempt as timed out."""
        got = state.got
        got.timed_out = True
        path = self.notes_path(notes, result.step)
        template = WRAP_UP_DEGRADED_DOC  # if the runtime must write them: notes, not a handoff
        if reply.strip():
            got.notes_doc = keep_reply(
                notes, result.step, reply, task, got, state.asked_at, path=path, template=template
            )
        else:
            got.notes_doc = write_degraded(notes, result, task, got, path=path, template=template)

    def stopped_at_deadline(self, notes: Path, state: AttemptState, result: StepResult, task: str) -> None:
        """Reading was stopped after the wrap-up window: the runtime writes the notes itself."""
        got = state.got
        if got.timed_out:
            return
        got.error = got.error or "the turn did not stop at the deadline"
        self.wrapped(notes, state, result, task, "")
