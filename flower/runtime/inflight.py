"""The step in flight and its CLI process, for whoever must stop them from outside: a signal
handler rescuing the step into the manifest (SIGTERM, SIGHUP), or abandoning it (a second
Ctrl-C). A gate's judge may run inside a step's run, so several steps can be in flight."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from claude_agent_sdk import ClaudeSDKClient

from flower.clock import now_iso
from flower.result import StepResult


class InFlight:
    """The results being made, those already written by a rescue, and the live CLI client."""

    def __init__(self) -> None:
        self.results: list[StepResult] = []
        self.rescued: set[int] = set()
        self.client: ClaudeSDKClient | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def start(self, result: StepResult) -> None:
        self.results.append(result)

    def finish(self, result: StepResult) -> bool:
        """The step's run is over; True when it is still to be recorded (no rescue wrote it)."""
        self.results = [r for r in self.results if r is not result]
        return id(result) not in self.rescued

    def rescue(self, error: str) -> list[StepResult]:
        """Stop the CLI and mark every step in flight failed with `error`; they are returned
        for the caller to record."""
        inflight, self.results = list(self.results), []
        self.kill_cli()
        for current in inflight:
            self.rescued.add(id(current))
            current.ok = False
            current.error = error
            current.ended_at = now_iso("milliseconds")
        return inflight

    def abandon(self) -> None:
        """Give up the steps in flight without recording them: stop the CLI."""
        self.rescued.update(id(r) for r in self.results)
        self.results = []
        self.kill_cli()

    def kill_cli(self) -> None:
        process = getattr(getattr(self.client, "_transport", None), "_process", None)
        pid = getattr(process, "pid", None)
        if pid and getattr(process, "returncode", None) is None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
