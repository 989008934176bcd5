"""flower's own writes on a full disk (issue 36): sessions.db, manifest.json, lineage.json and
continuity.json fail cleanly. The first such write is noted, the workflow stops before its next
step, `flower` ends with one line naming the run directory (class "disk"), every file keeps its
last complete version, and once space is freed the same command continues.

Unit tests of the recognising and noting, then the real `flower` command with its run directory
on a small tmpfs of its own (root, as CI runs) that the test fills while a step is under way."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flower import exitinfo
from flower.flows.continuity import ContinuityLog
from flower.flows.lineage import Lineage
from flower.full_disk import FullDisk, is_full
from tests.rig import scripted

ENOSPC = OSError(errno.ENOSPC, "No space left on device")


# -- recognising a full disk ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("error", "full"),
    [
        (ENOSPC, True),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), True),
        (OSError(errno.EACCES, "Permission denied"), False),
        (sqlite3.OperationalError("database or disk is full"), True),
        (sqlite3.OperationalError("database is locked"), False),
        ("OperationalError: database or disk is full", True),  # the SDK's mirror error, as text
        ("[Errno 28] No space left on device", True),
        ("timed out", False),
        (ValueError("No space left on device"), False),  # not an error that writes anything
    ],
)
def test_what_counts_as_a_full_disk(error, full: bool) -> None:
    assert is_full(error) is full


def test_only_the_first_full_write_is_kept_and_other_errors_are_not_noted(tmp_path: Path) -> None:
    noted = FullDisk(tmp_path)
    assert noted.note("lineage.json", OSError(errno.EACCES, "Permission denied")) is False
    assert noted.first is None
    assert noted.note("manifest.json", ENOSPC) and noted.note("sessions.db", "database or disk is full")
    assert noted.first == "manifest.json could not be written (No space left on device)"
    reason = noted.reason("build")
    assert str(tmp_path) in reason and "after step build" in reason and "run the same command again" in reason


def test_lineage_and_continuity_note_a_full_disk_and_keep_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    noted = FullDisk(tmp_path)
    lineage = Lineage(tmp_path, tmp_path)
    lineage.full_disk = noted
    lineage.record("plan", "s-1")
    before = (tmp_path / "lineage.json").read_text()

    def no_room(*_a, **_k):
        raise ENOSPC

    monkeypatch.setattr("flower.flows.lineage.write_atomic", no_room)
    monkeypatch.setattr("flower.flows.continuity.write_atomic", no_room)
    lineage.record("build", "s-2")  # bookkeeping: no exception reaches the step
    ContinuityLog(tmp_path, "run-1", full_disk=noted).add({"step": "build", "continued": False})
    assert noted.first is not None and noted.first.startswith("lineage.json could not be written")
    assert (tmp_path / "lineage.json").read_text() == before
    assert not (tmp_path / "continuity.json").exists()
    monkeypatch.undo()
    lineage.record("check", "s-3")  # room again: the whole table, the lost entry too
    assert json.loads((tmp_path / "lineage.json").read_text())["steps"] == {
        "plan": "s-1",
        "build": "s-2",
        "check": "s-3",
    }


def test_a_full_disk_is_its_own_exit_class() -> None:
    ctx = {"_disk_full": ("build", "the disk of the run directory /r is full: ...")}
    assert exitinfo.step_failure(ctx) == ("disk", ctx["_disk_full"][1], "build")


# -- the real command, its run directory filling while a step is under way ---------------------------
WORKFLOW = """
from flower import AgentSpec, Step, Workflow

SPEC = AgentSpec("worker", instructions="ROLE=worker", allowed_tools=["Read"])
main = Workflow([Step("one", SPEC, "first step"), Step("two", SPEC, "second step")])
"""
SCENARIO = {
    "rules": [
        # the first run's first step thinks a while: the test fills the disk meanwhile
        {
            "name": "one",
            "when": {"last_user_contains": "first step"},
            "times": 1,
            "delay_s": 3,
            "reply": [{"text": "one done"}],
        },  # fmt: skip
        {"name": "one again", "when": {"last_user_contains": "first step"}, "reply": [{"text": "one done"}]},
        {"name": "resumed", "when": {"last_user_contains": "上一轮"}, "reply": [{"text": "one done"}]},
        {"name": "two", "when": {"last_user_contains": "second step"}, "reply": [{"text": "two done"}]},
    ]
}


@pytest.fixture
def small_run_dir(tmp_path: Path) -> Iterator[Path]:
    """A run directory on a 4 MiB tmpfs of its own."""
    if os.getuid() != 0:
        pytest.skip("mounting a small filesystem for the run directory needs root (CI runs as root)")
    runs = tmp_path / "runs"
    runs.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(runs)], check=True)
    try:
        yield runs
    finally:
        subprocess.run(["umount", "-l", str(runs)], check=False)


class Ballast:
    """Keeps a filesystem full: a file grown until ENOSPC, and grown again whenever something
    frees a block (the CLI removing a temp file), until stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._grow, daemon=True)

    def __enter__(self) -> Ballast:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.path.unlink()

    def _grow(self) -> None:
        with open(self.path, "ab", buffering=0) as f:
            while not self._stop.is_set():
                try:
                    f.write(b"\0" * 65536)
                except OSError:
                    try:
                        f.write(b"\0" * 4096)
                    except OSError:
                        time.sleep(0.01)


def flower_command(ws: Path, run_dir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "flower", "-w", str(ws), "-r", str(run_dir), *args]


def filled_mid_step(
    command: list[str], cwd: Path, env: dict[str, str], run_dir: Path, started: Callable[[], bool]
) -> subprocess.CompletedProcess[str]:
    """`command` run until `started()` says its step is under way, then to its end with its run
    directory kept full (the ballast removed once it has ended)."""
    proc = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not started() and time.monotonic() < deadline:
        time.sleep(0.05)
    with Ballast(run_dir / "ballast"):
        out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def one_flower_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("flower:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_the_run_directory_filling_mid_step_ends_in_one_line_and_the_same_command_continues(
    tmp_path: Path, small_run_dir: Path
) -> None:
    (tmp_path / "wf.py").write_text(WORKFLOW)
    ws = tmp_path / "ws"
    ws.mkdir()
    lineage = small_run_dir / "lineage.json"
    with scripted(tmp_path, SCENARIO) as srv:
        env = {**os.environ, **srv.env(small_run_dir / "cfg")}
        command = flower_command(ws, small_run_dir, "run", "wf.py:main")
        first = filled_mid_step(
            command, tmp_path, env, small_run_dir, lambda: lineage.exists() and "one" in lineage.read_text()
        )
        assert first.returncode == 1, first.stderr
        line = one_flower_line(first)
        assert f"the disk of the run directory {small_run_dir} is full" in line, line
        assert "after step one" in line  # the second step never started on it
        assert not [r for r in srv.requests if "second step" in json.dumps(r["body"])]
        # every file of flower's is whole: its last complete version
        manifest = small_run_dir / "manifest.json"  # none yet: its first write found no room
        assert not manifest.exists() or isinstance(json.loads(manifest.read_text()), list)
        assert json.loads(lineage.read_text())["steps"]["one"]
        cause = exitinfo.read(small_run_dir)
        assert cause is None or cause["class"] == "disk", cause
        again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert exitinfo.read(small_run_dir)["class"] == "done"
    rows = json.loads((small_run_dir / "manifest.json").read_text())
    assert [r["step"] for r in rows if r["ok"]][-2:] == ["one", "two"]


def test_once_on_a_run_directory_that_fills_mid_step_says_so_in_one_line(
    tmp_path: Path, small_run_dir: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with scripted(tmp_path, SCENARIO) as srv:
        env = {**os.environ, **srv.env(small_run_dir / "cfg")}
        command = flower_command(ws, small_run_dir, "once", "first step")
        proc = filled_mid_step(
            command, tmp_path, env, small_run_dir, lambda: any(r["rule"] == "one" for r in srv.requests)
        )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = one_flower_line(proc)
    assert f"the disk of the run directory {small_run_dir} is full" in line, line


def test_a_retryable_error_on_a_full_run_directory_is_not_retried(
    tmp_path: Path, small_run_dir: Path
) -> None:
    """An overloaded model (529, retried with backoff for minutes) while the run directory is
    full: a retry could not save its turns either, so flower stops at once with the disk's line."""
    ws = tmp_path / "ws"
    ws.mkdir()
    overloaded = {
        "rules": [{"name": "busy", "when": {"last_user_contains": "first step"}, "delay_s": 2, "error": 529}]
    }
    with scripted(tmp_path, overloaded) as srv:
        env = {**os.environ, **srv.env(small_run_dir / "cfg")}
        started = time.monotonic()
        proc = filled_mid_step(
            flower_command(ws, small_run_dir, "once", "first step"),
            tmp_path,
            env,
            small_run_dir,
            lambda: any(r["rule"] == "busy" for r in srv.requests),
        )
        asked = len([r for r in srv.requests if r["rule"] == "busy"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "is full" in one_flower_line(proc)
    # one attempt (the CLI's own two retries inside it), not flower's backing off for minutes
    assert asked <= 3 and time.monotonic() - started < 60, (asked, proc.stderr)


def test_a_session_store_that_cannot_open_on_a_full_disk_says_the_disk(
    tmp_path: Path, small_run_dir: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with scripted(tmp_path, SCENARIO) as srv:
        env = {**os.environ, **srv.env(small_run_dir / "cfg")}
        with Ballast(small_run_dir / "ballast"):
            time.sleep(0.5)  # full before flower starts
            proc = subprocess.run(
                flower_command(ws, small_run_dir, "once", "second step"),
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    line = one_flower_line(proc)
    assert "sessions.db could not be written" in line and "move it aside" not in line, line
