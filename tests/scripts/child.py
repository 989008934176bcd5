"""Run `flower` as a real child process and do to it what a user, a terminal or the kernel would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

FLOW = str(Path(__file__).with_name("continuity_flow.py")) + ":flow"


def wait_until(predicate: Callable[[], object], timeout: float = 60.0, interval: float = 0.05) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout} s waiting for {getattr(predicate, '__name__', predicate)}"
    )


def descendants(pid: int) -> list[int]:
    """All live descendants of `pid` (Linux /proc), children first."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            children = Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            out.append(child)
            out.extend(descendants(child))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def lineage(runs: Path) -> dict:
    try:
        return json.loads((runs / "lineage.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def manifest(runs: Path) -> list[dict]:
    try:
        return json.loads((runs / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []


class Child:
    """`python -m flower -w WS -r RUNS <args>` in its own session (like a terminal's foreground job)."""

    def __init__(
        self,
        tmp_path: Path,
        env: dict[str, str],
        *args: str,
        stdin: int | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.ws = tmp_path / "ws"
        self.runs = tmp_path / "runs"
        self.ws.mkdir(exist_ok=True)
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "flower", "-w", str(self.ws), "-r", str(self.runs), *args],
            cwd=tmp_path,
            env={**os.environ, **env, **(extra_env or {})},
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_output(self, text: str, timeout: float = 60.0) -> None:
        wait_until(lambda: text in self.output, timeout)

    def wait(self, timeout: float = 120.0) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code

    def signal_group(self, sig: int) -> None:
        """What a terminal does on Ctrl-C: the signal goes to the whole foreground process group."""
        os.killpg(self.proc.pid, sig)

    def kill_tree(self) -> list[int]:
        """SIGKILL flower and everything it started (the CLI runs in its own process group, so a
        group kill alone would leave it): what a power cut does. Returns the pids killed."""
        pids = [self.proc.pid, *descendants(self.proc.pid)]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.wait(30)
        wait_until(lambda: not any(alive(p) for p in pids[1:]), 10)
        return pids

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.kill_tree()
