"""The runtime's side of a handoff (flower.context.handoff): when the context is due, and the
document the session wrote kept, or one the runtime writes itself (degraded).

The notes at the deadline (flower.runtime.wrap_up) are kept the same way, with their own file
and template.
"""

from __future__ import annotations

from pathlib import Path

from claude_agent_sdk import ClaudeSDKClient

from flower.catalogue.context import DEGRADED_DOC, HANDOFF_OWN_REPLY, HANDOFF_REQUIRED
from flower.context.handoff import Handoff, degraded_doc, doc_path, missing_sections, normalise
from flower.context.handoff import save as save_doc
from flower.events import ContextWarning, HandoffDue
from flower.result import StepResult
from flower.runtime.attempt import Attempt, AttemptState, Phase
from flower.runtime.emit import EventHook, emit
from flower.runtime.interrupts import safe_interrupt


async def watch_context(
    handoff: Handoff,
    state: AttemptState,
    client: ClaudeSDKClient,
    on_event: EventHook | None,
    may_hand_off: bool,
) -> None:
    """WORK -> DUE when the context is full (interrupt sent); a warning once before that."""
    context = state.got.context
    if state.phase is Phase.WORK and may_hand_off and handoff.due(context):
        state.phase = Phase.DUE
        await emit(on_event, HandoffDue(context=context, at=handoff.at))
        await safe_interrupt(client)
    elif not state.warned and handoff.enabled and context >= handoff.warn_at:
        state.warned = True
        await emit(on_event, ContextWarning(context=context, at=handoff.at))


def write_degraded(
    notes: Path,
    result: StepResult,
    task: str,
    got: Attempt,
    path: Path | None = None,
    template: str = DEGRADED_DOC,
) -> Path:
    """The document the runtime writes itself: only the facts it knows for sure."""
    path = path or doc_path(notes, result.step)
    try:
        previous = path.read_text(encoding="utf-8")
    except OSError:
        previous = ""
    text = degraded_doc(
        step=result.step,
        task=task,
        last_text=got.text or result.text,
        tool_calls=result.tool_calls + got.tool_calls,
        error=got.error or "",
        previous=previous,
        template=template,
    )
    return save_doc(path, text)


def keep_reply(
    notes: Path,
    step: str,
    reply: str,
    task: str,
    got: Attempt,
    asked_at: float,
    path: Path | None = None,
    template: str = DEGRADED_DOC,
) -> Path:
    """The session's reply as its document; else the file it wrote itself; else a degraded
    document that keeps what it said under 现场."""
    path = path or doc_path(notes, step)
    if reply.strip() and not missing_sections(reply):
        return save_doc(path, normalise(reply, step))
    try:  # a session with Write may have written the file itself and replied "done"
        if path.stat().st_mtime >= asked_at - 1 and not missing_sections(path.read_text(encoding="utf-8")):
            return path
    except (OSError, UnicodeDecodeError):
        pass
    text = degraded_doc(
        step=step,
        task=task,
        last_text=got.text,
        tool_calls=got.tool_calls,
        error=f"the session's handoff reply lacked {'/'.join(HANDOFF_REQUIRED)}",
        template=template,
    )
    return save_doc(path, text + HANDOFF_OWN_REPLY + reply.strip() + "\n")
