"""`flower` driven in a real terminal (a pty that is the process's controlling terminal): answering
a question, typing during a run, the wake prompt (Enter, words, /new, Ctrl-C), Ctrl-C during a
run (add a word and go on; twice = quit with 130). Real CLI, scripted model."""

from __future__ import annotations

import fcntl
import json
import os
import random
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
import tomllib
from pathlib import Path

import pytest

from flower.scripted import Scenario, ScriptedServer

STARTER = Path(__file__).resolve().parents[3] / "examples" / "scenarios" / "starter.toml"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

# A slow continuation, so that Ctrl-C lands while the model is "thinking"; and the answer to the
# word added after it.
EXTRA_RULES = [
    {
        "name": "work: slow continuation",
        "delay_s": 4.0,
        "when": {
            "system_contains": "## 协调规则",
            "last_user_contains": "接着上次的工作继续",
            "last_is_tool_result": False,
        },
        "reply": "看过了。",
    },
    {
        "name": "work: the added word",
        "when": {"system_contains": "## 协调规则", "last_user_contains": "WORD-AFTER-CTRL-C"},
        "reply": "收到补充, 已经照做。",
    },
]


class Terminal:
    """A flower process on a pty: `expect` text on the screen, `send` keys.

    By default flower starts with SIGINT ignored, as a background job of a shell without job
    control (`make test &`, CI runners) starts it: Ctrl-C must reach it all the same, and the
    test must not depend on how pytest itself was started (it hung when it was).
    """

    def __init__(
        self, args: list[str], cwd: Path, env: dict[str, str], *, sigint_ignored: bool = True
    ) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        disposition = signal.SIG_IGN if sigint_ignored else signal.SIG_DFL

        def as_terminal_session() -> None:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # the pty is its terminal
            signal.signal(signal.SIGINT, disposition)

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "flower", *args],
            cwd=cwd,
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=as_terminal_session,
        )
        os.close(slave)
        self.master = master
        self.screen = ""
        self.cursor = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                self.screen += ANSI.sub("", chunk.decode("utf-8", errors="replace"))

    def expect(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                at = self.screen.find(text, self.cursor)
                if at >= 0:
                    self.cursor = at + len(text)
                    return
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not on screen within {timeout}s; screen:\n{self.screen[-3000:]}")

    def send(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def wait(self, timeout: float = 90) -> int:
        code = self.proc.wait(timeout=timeout)
        time.sleep(0.2)  # let the pump take the last output
        os.close(self.master)
        return code


def count(srv: ScriptedServer, rule: str) -> int:
    return sum(1 for r in srv.requests if r["rule"] == rule)


def wait_for_request(srv: ScriptedServer, rule: str, before: int, timeout: float = 60) -> None:
    """Until a new request for `rule` reached the model (logged on arrival, before its delay):
    the step's CLI is running and the model is "thinking"."""
    deadline = time.monotonic() + timeout
    while count(srv, rule) <= before:
        assert time.monotonic() < deadline, f"no request for {rule!r}"
        time.sleep(0.05)


def last_run(runs: Path) -> list[str]:
    rows = json.loads((runs / "manifest.json").read_text())
    return [r["step"] for r in rows if r["run"] == rows[-1]["run"]]


@pytest.mark.slow
def test_a_person_at_the_terminal(tmp_path):
    scenario = tomllib.loads(STARTER.read_text(encoding="utf-8"))
    scenario["rules"] = EXTRA_RULES + scenario["rules"]
    ws = tmp_path / "ws"
    ws.mkdir()
    notes, runs = ws / ".flower" / "notes", ws / "runs"
    with ScriptedServer(
        Scenario.from_dict(scenario), log_path=tmp_path / "model.jsonl", keep_requests=True
    ) as srv:
        env = {**os.environ, **srv.env(tmp_path / "cfg"), "NO_COLOR": "1", "TERM": "xterm"}

        def flower(*args: str) -> Terminal:
            return Terminal(list(args), ws, env)

        # First run: the question reaches the terminal and is answered; a line typed later goes
        # to the agent's inbox and into 需求.md.
        t = flower("make hello.txt say hi")
        t.expect("❓ hello.txt 里只写 hi")
        t.expect("Enter submits")
        t.send("just hi\r")
        t.expect("✓ answer received")
        t.send("TYPED-NOTE be polite\r")
        t.expect("in the inbox (the agent reads it between phases)")
        t.expect("\ndone")  # DONE or DONE_JUDGED, at the start of its line
        assert t.wait() == 0
        brief = (notes / "需求.md").read_text()
        assert (
            "用户回答了内容的问题" in brief and "TYPED-NOTE be polite" in brief and "## 运行中补充" in brief
        )
        assert "just hi" in (notes / "问答记录.md").read_text()

        # Wake prompt, Enter = continue; one Ctrl-C mid-step asks for a word and goes on.
        slow = count(srv, "work: slow continuation")
        t = flower()
        t.expect("<- back in")
        t.expect("Continue? Enter = go on")
        t.send("\r")
        t.expect("== work")
        wait_for_request(srv, "work: slow continuation", slow)
        t.send("\x03")
        t.expect("Add a word?")
        t.send("WORD-AFTER-CTRL-C\r")
        t.expect("\ndone")  # DONE or DONE_JUDGED, at the start of its line
        assert t.wait() == 0
        assert last_run(runs) == ["干活", "干活·判定#1"]  # the interrupt was not a failed attempt

        # Two Ctrl-C mid-step: quit at once with 130.
        slow = count(srv, "work: slow continuation")
        t = flower()
        t.expect("Continue?")
        t.send("\r")
        t.expect("== work")
        wait_for_request(srv, "work: slow continuation", slow)
        t.send("\x03")
        t.expect("(Ctrl-C again quits)")
        t.send("\x03")
        assert t.wait() == 130

        # Words at the wake prompt = a wake with words.
        t = flower()
        t.expect("Continue?")
        t.send("also add bye.txt\r")
        t.expect("\ndone")  # DONE or DONE_JUDGED, at the start of its line
        assert t.wait() == 0
        assert (ws / "bye.txt").read_text() == "bye\n" and "also add bye.txt" in (
            notes / "需求.md"
        ).read_text()
        assert last_run(runs) == ["设定目标", "干活", "干活·判定#1"]

        # /new archives and asks for the new task; an empty line declines the question.
        t = flower("--clarify-only")
        t.expect("Continue?")
        t.send("/new\r")
        t.expect("What shall I do?")
        t.send("make hello.txt say hi\r")
        t.expect("Enter submits")
        t.send("\r")
        t.expect("(no answer: the agent decides)")
        t.expect("brief settled")
        assert t.wait() == 0
        assert len(list((notes / "archive").iterdir())) == 1

        # Ctrl-C at the wake prompt: quit, 130, nothing run.
        seen = len(srv.requests)
        t = flower()
        t.expect("Continue?")
        t.send("\x03")
        assert t.wait() == 130
        assert len(srv.requests) == seen
        assert not srv.unmatched


@pytest.mark.slow
def test_ctrl_c_at_the_wake_prompt_always_quits(tmp_path):
    """Pressed at once or after a short delay, with SIGINT inherited ignored or not: 130 every
    time, and nothing reaches the model."""
    scenario = tomllib.loads(STARTER.read_text(encoding="utf-8"))
    ws = tmp_path / "ws"
    ws.mkdir()
    with ScriptedServer(Scenario.from_dict(scenario), keep_requests=True) as srv:
        env = {**os.environ, **srv.env(tmp_path / "cfg"), "NO_COLOR": "1", "TERM": "xterm"}
        t = Terminal(["make hello.txt say hi"], ws, env)
        t.expect("Enter submits")
        t.send("just hi\r")
        t.expect("\ndone")  # DONE or DONE_JUDGED, at the start of its line
        assert t.wait() == 0
        seen = len(srv.requests)
        delays = [0.0, 0.0, 0.001, 0.01, 0.05, 0.2]
        for press, delay in enumerate(delays + random.sample(delays, 2)):
            t = Terminal([], ws, env, sigint_ignored=press % 2 == 0)
            t.expect("Continue?")
            time.sleep(delay)
            t.send("\x03")
            assert t.wait(timeout=30) == 130, f"press {press} after {delay}s:\n{t.screen[-1500:]}"
            assert "flower: quit" in t.screen
        assert len(srv.requests) == seen
