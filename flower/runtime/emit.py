"""Telling the caller what happens: one event to the step's hook (a display, a log)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from flower.events import Event
from flower.protocols import EventSink

log = logging.getLogger(__name__)

EventHook = EventSink  # (kind, payload); the name Runtime's callers know


async def emit(on_event: EventHook | None, event: Event) -> None:
    """Tell the caller's hook; a failing hook (a display, say) never fails the step."""
    if on_event is None:
        return
    kind = event.kind
    try:
        out = on_event(kind, event.payload())
        if isinstance(out, Awaitable):
            await out
    except Exception as exc:  # noqa: BLE001
        log.warning("on_event hook failed on %s: %s: %s", kind, type(exc).__name__, exc)
