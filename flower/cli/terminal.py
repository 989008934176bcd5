"""The person's side of `flower go`: the wake prompt, and what they type while flower works.

One reader owns stdin for the whole run (two readers would steal each other's lines). A typed
line goes to the HumanChannel — it answers the open question, else lands in the agent's inbox
and in 需求.md — unless something is waiting for the next line (the word added after one
Ctrl-C). At end of input (a pipe or /dev/null ran dry, Ctrl-D) nobody can answer any more: the
open questions are declined and later ones are answered "nobody" at once (fully automatic).
"""

from __future__ import annotations

import contextlib
import queue
import signal
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

from flower.catalogue.terminal import ADD_PROMPT
from flower.protocols import PersonChannel

NEW = "/new"


def interactive(stream: Any = None) -> bool:
    """stdin is a terminal a person types into (not a pipe, not /dev/null)."""
    stream = sys.stdin if stream is None else stream
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):
        return False


def take_ctrl_c(stream: Any = None) -> bool:
    """At a terminal, Ctrl-C is the person's: make SIGINT raise KeyboardInterrupt again.

    A process inherits an ignored SIGINT from whatever started it in the background (a shell
    without job control ignores SIGINT in every `cmd &`; nohup; CI runners), and Python then
    keeps it ignored. flower's prompts say "Ctrl-C quits", so a person's press would be lost:
    the wake prompt waited for a line forever. True when the handler was installed.
    """
    if not interactive(stream):
        return False
    with contextlib.suppress(ValueError, OSError):  # ValueError: not the main thread
        signal.signal(signal.SIGINT, signal.default_int_handler)
        return True
    return False


def ask_line(prompt: str, *, stream: IO[str] | None = None, out: IO[str] | None = None) -> str | None:
    """Show `prompt`, read one line; None at end of input. Ctrl-C raises KeyboardInterrupt."""
    stream = stream or sys.stdin
    out = out or sys.stderr
    out.write(prompt)
    out.flush()
    line = stream.readline()
    if not line:
        return None
    return line.rstrip("\n").strip()


class TypedLines:
    """The single reader of stdin while a run is going (see the module docstring)."""

    def __init__(
        self,
        channel: PersonChannel,
        *,
        stream: IO[str] | None = None,
        out: IO[str] | None = None,
        on_delivered: Callable[[str, str], None] | None = None,
    ) -> None:
        self.channel = channel
        self.stream = stream or sys.stdin
        self.out = out or sys.stderr
        self.on_delivered = on_delivered  # (where, text): "answer", "inbox" or "declined"
        self.ended = threading.Event()
        self._lock = threading.Lock()
        self._waiter: queue.Queue[str | None] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> TypedLines:
        self._thread = threading.Thread(target=self._read, name="flower-stdin", daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        while True:
            try:
                line = self.stream.readline()
            except (OSError, ValueError):
                line = ""
            if not line:
                self._end()
                return
            text = line.rstrip("\n").strip()
            with self._lock:
                waiter, self._waiter = self._waiter, None
            if waiter is not None:
                waiter.put(text)
            elif text:
                self._delivered(self.channel.deliver(text), text)
            elif self.channel.pending is not None and self.channel.decline():
                self._delivered("declined", "")  # an empty line: not answering this question

    def _delivered(self, where: str, text: str) -> None:
        if self.on_delivered is not None:
            self.on_delivered(where, text)

    def _end(self) -> None:
        self.ended.set()
        with self._lock:
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.put(None)
        # Nobody is left to answer: stop waiting for a person from now on.
        self.channel.timeout_s = 0.0
        while self.channel.decline():
            pass

    def next_line(self, prompt: str = ADD_PROMPT) -> str:
        """The next typed line (for the word added after one Ctrl-C); "" at end of input.

        Blocking: the runtime calls it on a daemon thread.
        """
        waiter: queue.Queue[str | None] = queue.Queue(maxsize=1)
        with self._lock:
            self._waiter = waiter
        if self.ended.is_set():  # checked after registering: the reader may have just ended
            return ""
        self.out.write(prompt)
        self.out.flush()
        got = waiter.get()
        return got or ""
