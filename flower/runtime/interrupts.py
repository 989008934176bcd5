"""A person's interrupt of a running step (one Ctrl-C), across threads and signal handlers.

`request()` may be called from any thread or a signal handler: it only records the message and
schedules the SDK's interrupt on the runtime's loop. The attempt's loop `take()`s it when the
turn has stopped, and sends the follow-up to the same session; `sent()` then ends it.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

from claude_agent_sdk import ClaudeSDKClient

Message = str | Callable[[], Any]  # the follow-up, or a function asked for it (e.g. the terminal)


class Interrupts:
    """The pending interrupt of one Runtime, guarded by a lock (signal handlers call in)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: Message | None = None
        self._interrupting = False

    @property
    def interrupting(self) -> bool:
        """True from `request()` until the session has been sent its follow-up."""
        return self._interrupting

    def request(
        self, message: Message, client: ClaudeSDKClient | None, loop: asyncio.AbstractEventLoop | None
    ) -> bool:
        """Record `message` and interrupt the running turn; False when no step is running."""
        if client is None or loop is None or loop.is_closed():
            return False
        with self._lock:
            self._pending = message
            self._interrupting = True
        loop.call_soon_threadsafe(lambda: loop.create_task(safe_interrupt(client)))
        return True

    async def take(self, *, usable: bool, default: str) -> str | None:
        """The follow-up to send (`default` when the person gave no word), or None when there is
        no interrupt or the turn failed on its own (`usable` False: the error path takes over)."""
        with self._lock:
            pending = self._pending
            self._pending = None
            if pending is None:
                return None
            if not usable:
                self._interrupting = False
                return None
        text = await ask(pending) if callable(pending) else pending
        return (text or "").strip() or default

    def sent(self) -> None:
        """The follow-up reached the session: the interrupt is over."""
        with self._lock:
            self._interrupting = False

    def clear(self) -> None:
        """The step ended: forget any interrupt that came too late."""
        with self._lock:
            self._pending, self._interrupting = None, False


async def ask(fn: Callable[[], Any]) -> str:
    """Call `fn` for the word added to an interrupt: awaited if async, else in a daemon thread
    (a blocked terminal read must never keep the process alive after a second Ctrl-C)."""
    if inspect.iscoroutinefunction(fn):
        return str(await fn() or "")
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(str(value or ""))

    def work() -> None:
        try:
            value = fn()
        except BaseException as exc:  # noqa: BLE001 — handed to the awaiting task
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, value, None)

    threading.Thread(target=work, name="flower-interrupt-ask", daemon=True).start()
    return await future


async def safe_interrupt(client: ClaudeSDKClient) -> None:
    """The SDK's interrupt; the turn may have ended on its own meanwhile, which is fine."""
    try:
        await client.interrupt()
    except Exception:  # noqa: BLE001 — the turn may have ended on its own meanwhile
        pass
