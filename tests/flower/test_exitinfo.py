"""flower's own account of why it ended (runs/.exit.json) and why each step continued or started
fresh (runs/continuity.json). Unit tests of the writer/reader, then the real `flower` command for
the causes that need no model (import failure, missing attribute, unreadable sessions.db)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flower import exitinfo
from flower.flows.continuity import ContinuityLog, decide, read_continuity
from flower.flows.lineage import Lineage
from flower.result import StepResult

FLOWER = Path(sys.executable).with_name("flower")


# -- .exit.json -------------------------------------------------------------------------------
def test_leave_then_read_round_trips_and_is_one_line(tmp_path: Path) -> None:
    exitinfo.leave(
        tmp_path, code=1, kind="target", reason="importing boom.py failed:\n  RuntimeError: x", stamp="run-1"
    )
    got = exitinfo.read(tmp_path, stamp="run-1")
    assert got == {
        "code": 1,
        "class": "target",
        "reason": "importing boom.py failed: RuntimeError: x",
        "step": None,
        "stamp": "run-1",
    }
    assert list(tmp_path.iterdir()) == [tmp_path / ".exit.json"]  # no temp file left behind


def test_a_file_of_another_run_is_not_taken_for_this_one(tmp_path: Path) -> None:
    exitinfo.leave(tmp_path, code=1, kind="step", reason="step a failed", stamp="earlier")
    assert exitinfo.read(tmp_path, stamp="now") is None
    assert exitinfo.read(tmp_path, stamp="earlier") is not None
    exitinfo.clear(tmp_path)
    assert exitinfo.read(tmp_path) is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "[]",
        '{"format": "flower/exit@1", "class": "nope", "code": 1, "reason": "x"}',
        '{"format": "flower/exit@1", "class": "step", "code": "1", "reason": "x"}',
    ],
)
def test_a_damaged_file_reads_as_absent(tmp_path: Path, text: str) -> None:
    (tmp_path / ".exit.json").write_text(text)
    assert exitinfo.read(tmp_path) is None


def test_leave_never_creates_the_run_directory(tmp_path: Path) -> None:
    exitinfo.leave(tmp_path / "runs", code=2, kind="usage", reason="bad flag")
    assert not (tmp_path / "runs").exists()


def _ctx(result: StepResult, **extra: object) -> dict:
    return {"_failed_at": result.step, "_results": {result.step: result}, **extra}


def test_step_failure_names_the_step_and_tells_api_errors_apart() -> None:
    assert exitinfo.step_failure({"_failed_at": None}) is None
    plain = StepResult(step="fix", ok=False, error="the CLI ended without a result")
    assert exitinfo.step_failure(_ctx(plain)) == (
        "step",
        "step fix failed: the CLI ended without a result",
        "fix",
    )
    refused = StepResult(
        step="fix", ok=False, error="[scripted model] invalid x-api-key", api_error_status=401
    )
    assert exitinfo.step_failure(_ctx(refused)) == (
        "api",
        "step fix: API error 401: [scripted model] invalid x-api-key",
        "fix",
    )
    billing = StepResult(step="fix", ok=False, error="credit balance is too low", api_error_status=402)
    assert exitinfo.step_failure(_ctx(billing))[0] == "api"
    overloaded = StepResult(step="fix", ok=False, error="overloaded", api_error_status=529)
    assert exitinfo.step_failure(_ctx(overloaded))[0] == "step"
    broken = StepResult(
        step="fix", ok=False, error="internal error: DatabaseError: database disk image is malformed"
    )
    kind, reason, _ = exitinfo.step_failure(_ctx(broken))  # type: ignore[misc]
    assert kind == "database" and "database disk image is malformed" in reason
    gated = StepResult(step="fix", ok=True)
    assert exitinfo.step_failure(_ctx(gated))[1] == "step fix: its gate did not pass the result"
    assert (
        exitinfo.step_failure(_ctx(gated, _aborted="tests red"))[1] == "step fix: its gate gave up: tests red"
    )


# -- continuity -------------------------------------------------------------------------------
def _lineage(tmp_path: Path, text: str | None, alive: set[str] = frozenset()) -> Lineage:  # type: ignore[assignment]
    runs = tmp_path / "runs"
    runs.mkdir(exist_ok=True)
    (runs / "lineage.json").unlink(missing_ok=True)
    if text is not None:
        (runs / "lineage.json").write_text(text)
    return Lineage.load(runs, tmp_path, lambda sid: sid in alive)


def _good(tmp_path: Path, sid: str = "abcdef1234567890") -> str:
    return json.dumps({"workspace": str(tmp_path.resolve()), "woke": 1, "steps": {"fix": sid}})


def test_each_fresh_start_says_why(tmp_path: Path) -> None:
    sid = "abcdef1234567890"
    cont = decide("fix", _lineage(tmp_path, _good(tmp_path), {sid}))
    assert cont == {
        "step": "fix",
        "continued": True,
        "session": sid,
        "reason": "continued session abcdef12… (lineage.json)",
    }
    assert decide("fix", _lineage(tmp_path, None))["reason"] == "lineage.json missing"
    assert (
        decide("fix", _lineage(tmp_path, None), first_run=True)["reason"] == "first run: nothing to continue"
    )
    truncated = _good(tmp_path)[:20]
    got = decide("fix", _lineage(tmp_path, truncated))
    assert not got["continued"] and got["reason"].startswith("lineage.json unreadable: ")
    unknown = decide("fix", _lineage(tmp_path, _good(tmp_path), set()))
    assert unknown == {
        "step": "fix",
        "continued": False,
        "session": sid,
        "reason": "session abcdef12… is not in sessions.db",
    }
    gone = decide("fix", _lineage(tmp_path, _good(tmp_path), set()), store_was_new=True)
    assert gone["reason"].endswith("(sessions.db was missing: a new store was started)")
    moved = json.dumps({"workspace": "/elsewhere", "steps": {"fix": sid}})
    assert decide("fix", _lineage(tmp_path, moved, {sid}))["reason"].startswith("workspace guard: ")
    assert decide("other", _lineage(tmp_path, _good(tmp_path), {sid}))["reason"] == (
        "no earlier session of this step in lineage.json"
    )
    assert decide("fix", None)["reason"].startswith("continuous=False")
    assert decide("review", None, resume_from="fix", resumed_session=sid)["continued"] is True


def test_the_log_keeps_one_entry_per_step_and_its_stamp(tmp_path: Path) -> None:
    log = ContinuityLog(tmp_path, "run-1", stamp="s-9")
    log.add({"step": "a", "continued": False, "session": None, "reason": "lineage.json missing"})
    log.add({"step": "b", "continued": True, "session": "x", "reason": "continued session x (lineage.json)"})
    log.add({"step": "a", "continued": False, "session": None, "reason": "again"})
    assert [e["step"] for e in read_continuity(tmp_path, stamp="s-9") or []] == ["b", "a"]
    assert read_continuity(tmp_path, stamp="other") is None


# -- the real command -------------------------------------------------------------------------
def _flower(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "ws").mkdir(exist_ok=True)
    env = {**os.environ, exitinfo.STAMP_ENV: "stamp-1"}
    return subprocess.run(
        [str(FLOWER), "-w", "ws", "-r", "runs", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_import_failure_and_a_missing_attribute_are_left_for_the_orchestrator(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    (tmp_path / "boom.py").write_text('raise RuntimeError("no flows today")\n')
    proc = _flower(tmp_path, "run", "boom.py:main")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    got = exitinfo.read(tmp_path / "runs", stamp="stamp-1")
    assert got is not None and got["class"] == "target" and got["code"] == 2
    assert "importing boom.py failed: RuntimeError: no flows today" in got["reason"]
    (tmp_path / "ok.py").write_text("X = 1\n")
    _flower(tmp_path, "run", "ok.py:main")
    got = exitinfo.read(tmp_path / "runs", stamp="stamp-1")
    assert got is not None and got["reason"] == "target 'ok.py:main': ok.py has no attribute 'main'"


def test_an_unreadable_sessions_db_is_one_line_and_a_database_cause(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "sessions.db").write_bytes(b"SQLite format 3\x00" + b"garbage" * 300)
    (tmp_path / "flows.py").write_text(
        "from flower import AgentSpec, Step, Workflow\n"
        "def main():\n    return Workflow([Step('a', AgentSpec('x'), 'hi')])\n"
    )
    proc = _flower(tmp_path, "run", "flows.py:main")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    got = exitinfo.read(runs, stamp="stamp-1")
    assert got is not None and got["class"] == "database"
    assert "sessions.db cannot be opened: file is not a database" in got["reason"]


def test_one_line_folds_whitespace_and_cuts_only_at_a_limit() -> None:
    # The one one_line of flower and flower_batch: the exit file's reason (bounded), the runner's
    # error and pre-flight's import problems (whole).
    assert exitinfo.one_line("  Traceback:\n\tKeyError:  'x'\r\n") == "Traceback: KeyError: 'x'"
    long = "word " * 200
    assert exitinfo.one_line(long) == long.strip()
    cut = exitinfo.one_line(long, 10)
    assert cut == "word word…" and len(cut) == 10
    assert exitinfo.one_line("just ten!!", 10) == "just ten!!"


def test_an_exit_reason_is_one_line_of_at_most_reason_limit(tmp_path: Path) -> None:
    exitinfo.leave(tmp_path, code=1, kind="crash", reason="boom\n" * 1000)
    found = exitinfo.read(tmp_path)
    assert found is not None
    reason = found["reason"]
    assert "\n" not in reason and len(reason) == exitinfo.REASON_LIMIT and reason.endswith("…")


def test_the_starter_flows_steps_are_named_to_the_person_by_their_labels() -> None:
    # The reason is read by a person (flower-batch's record, show, the report); `step` keeps the
    # workflow's own name (lineage, the manifest).
    gated = StepResult(step="确认需求", ok=True)
    assert exitinfo.step_failure(_ctx(gated)) == (
        "step",
        "step clarify: its gate did not pass the result",
        "确认需求",
    )
    judged = StepResult(step="干活·判定#2", ok=False, error="x")
    assert exitinfo.step_failure(_ctx(judged))[1] == "step work·judge#2 failed: x"
