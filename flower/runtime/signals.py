"""Signals: what Ctrl-C, SIGTERM and SIGHUP do to a running flower.

==================  ====================================================================
one Ctrl-C          cooperative interrupt at the next message boundary (the SDK's
                    interrupt); the person may add a word (`ask`), and the same session
                    resumes in the same process. Not a failed attempt.
two Ctrl-C          KeyboardInterrupt at once: the in-flight CLI is killed, only storage
                    is closed by the caller, the in-flight step is *not* in the manifest
                    (lineage already has its session, so the next run continues it).
                    The CLI exits 130.
SIGTERM / SIGHUP    `Runtime.rescue()` writes the in-flight step to the manifest with
                    ``error="killed-by-signal"``, then the default action (the process dies
                    of that signal). SIGHUP is what a dying terminal sends; its default
                    action skips every ``finally``, hence the handler.
SIGKILL, power off  nothing runs; the next run still continues (lineage was written the
                    moment the session id was known).
==================  ====================================================================

Use ``with install(runtime, ask=...):`` around ``anyio.run(...)`` in the main thread.

Why the CLI gets its own process group
--------------------------------------
A terminal sends Ctrl-C to its whole foreground process group. The bundled CLI (2.1.327)
handles SIGINT itself — it aborts the request and *exits* — and it installs its handler even
when it inherited SIGINT as ignored, so the SDK's session would die under flower's feet
(checked with the real CLI). `shielded_cli()` therefore writes a tiny launcher that moves
the CLI into its own process group (``setpgid(0, 0)``) and ``exec``s it: same pid, same
session, no terminal signals. Ctrl-C then reaches only flower, which asks the CLI to stop
through the SDK's control channel. The runtime pipes the CLI's stderr, so the background
group never writes to the terminal either.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from flower import exitinfo
from flower.catalogue.runtime import INTERRUPT_NOTICE, INTERRUPT_PROMPT
from flower.fileio import write_atomic
from flower.protocols import Interruptible

Ask = Callable[[], str]


class SignalGuard:
    """The installed handlers (see the module docstring)."""

    def __init__(
        self,
        runtime: Interruptible,
        *,
        ask: Ask | None = None,
        notify: Callable[[str], None] | None = None,
        terminate: tuple[int, ...] = (),
    ) -> None:
        self.runtime = runtime
        self.ask = ask
        self.notify = notify or (lambda text: print(text, file=sys.stderr, flush=True))
        self.terminate = terminate
        self._previous: dict[int, Any] = {}

    # -- handlers ---------------------------------------------------------------------------
    def on_sigint(self, signum: int, frame: Any) -> None:
        rt = self.runtime
        # A press while an interrupt is still on its way (or while the person is typing the
        # added word) is the second one; a press with no step running has nothing to
        # interrupt. Both stop now.
        if not getattr(rt, "interrupting", False) and rt.interrupt(self.ask or ""):
            self.notify(INTERRUPT_NOTICE)
            return
        # Only storage is closed (by the caller's finally); the CLI child goes too, so no
        # orphan keeps spending.
        with contextlib.suppress(Exception):
            rt.abandon()
        raise KeyboardInterrupt

    def on_terminate(self, signum: int, frame: Any) -> None:
        steps = [getattr(r, "step", "?") for r in getattr(self.runtime, "in_flight", [])]
        with contextlib.suppress(Exception):
            self.runtime.rescue("killed-by-signal")
        with contextlib.suppress(Exception):  # the cause, for an orchestrator that sees only 143
            name = signal.Signals(signum).name
            during = f" during step {steps[0]}" if steps else " between steps"
            exitinfo.leave(
                self.runtime.run_dir,
                code=128 + signum,
                kind="signal",
                reason=f"killed by {name}{during} (the step is recorded as killed-by-signal)",
                step=steps[0] if steps else None,
                stamp=getattr(self.runtime, "run_stamp", None),
            )
        # Restore the default action and deliver the signal again: the process dies of it,
        # so a supervisor sees the real cause (exit status 128 + signum).
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    # -- install / restore ------------------------------------------------------------------
    def install(self) -> SignalGuard:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError(
                "signals.install() must run in the main thread (Python delivers signals there)"
            )
        self._previous[signal.SIGINT] = signal.signal(signal.SIGINT, self.on_sigint)
        for sig in self.terminate:
            self._previous[sig] = signal.signal(sig, self.on_terminate)
        return self

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            with contextlib.suppress(Exception):
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous.clear()


def terminating_signals() -> tuple[int, ...]:
    return tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def install(
    runtime: Interruptible, *, ask: Ask | None = None, notify: Callable[[str], None] | None = None
) -> Iterator[SignalGuard]:
    """Install flower's SIGINT/SIGTERM/SIGHUP handling for `runtime` while the block runs.

    `ask` (optional, blocking, called in a daemon thread after the interrupt landed) returns
    the word the person adds; "" continues with the neutral resume prompt. `notify` prints a
    one-line notice (default: stderr).
    """
    guard = SignalGuard(runtime, ask=ask, notify=notify, terminate=terminating_signals()).install()
    try:
        yield guard
    finally:
        guard.restore()


def ask_on_terminal(prompt: str = INTERRUPT_PROMPT) -> Ask | None:
    """An `ask` that reads one line from stdin when stdin is a terminal; None otherwise (a pipe
    or /dev/null never blocks an interrupt)."""
    try:
        interactive = sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):
        interactive = False
    if not interactive:
        return None

    def ask() -> str:
        sys.stderr.write(prompt)
        sys.stderr.flush()
        line = sys.stdin.readline()
        return line.strip()

    return ask


# -- the CLI in its own process group -----------------------------------------------------------

_SHIM = """\
#!{python} -S
# Written by flower (flower/signals.py): run the Claude Code CLI in its own process group so
# a terminal's Ctrl-C reaches flower, which interrupts cooperatively, and not the CLI, which
# would exit. Same pid after exec, so the SDK's own signals still reach it.
import os, sys
try:
    os.setpgid(0, 0)
except OSError:
    pass
os.execv({real!r}, [{real!r}] + sys.argv[1:])
"""


def bundled_cli() -> str | None:
    """The CLI the SDK would run: the bundled binary, else `claude` on PATH."""
    import shutil

    import claude_agent_sdk

    name = "claude.exe" if os.name == "nt" else "claude"
    bundled = Path(claude_agent_sdk.__file__).parent / "_bundled" / name
    if bundled.is_file():
        return str(bundled)
    return shutil.which("claude")


def shielded_cli(real: str | None, directory: str | os.PathLike[str]) -> str | None:
    """Path of a launcher that runs `real` in its own process group, or None when that is not
    possible here (Windows, no CLI found, an interpreter path the shebang cannot carry, a
    directory that cannot hold executables). None means: run the CLI as the SDK would."""
    if os.name != "posix" or not real or not os.path.isfile(real):
        return None
    python = sys.executable
    if not python or any(ch.isspace() for ch in python) or len(python) > 120:
        return None
    text = _SHIM.format(python=python, real=str(real))
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = Path(directory) / f"claude-{digest}"
    try:
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            write_atomic(path, text, mode=0o755)
        if not os.access(path, os.X_OK):  # e.g. a noexec mount
            return None
    except OSError:
        return None
    return str(path)
