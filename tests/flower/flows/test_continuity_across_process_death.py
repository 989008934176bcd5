"""Continuity across real process death (the session id is in lineage.json the moment it is known,
so a killed step continues its session next time): `flower run` in a child process, killed
the hard way, then run again in the same directory. Real CLI, scripted model."""

from __future__ import annotations

import os
import signal
import sqlite3

import pytest

from flower import exitinfo
from flower.flows.continuity import read_continuity
from tests.rig import message_requests, scripted, texts_of
from tests.scripts.child import FLOW, Child, alive, descendants, lineage, manifest, wait_until

pytestmark = pytest.mark.slow

STEP1, STEP2 = "查资料", "写结论"


def scenario(first_answer_delay: float) -> dict:
    """Step 1 reads note.txt; the answer to the tool result is delayed the first time only,
    which holds the process in the middle of step 1 with two turns already in sessions.db."""
    return {
        "rules": [
            {
                "name": "resumed",
                "when": {"last_user_contains": "continue the reading"},
                "reply": [{"text": "resumed: the note says banana"}],
            },
            {
                "name": "read",
                "when": {"last_user_contains": "read the note", "last_is_tool_result": False},
                "reply": [
                    {"text": "Reading."},
                    {"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/note.txt"}}},
                ],
            },
            {
                "name": "slow-answer",
                "when": {"last_is_tool_result": True, "tool_result_contains": "banana"},
                "times": 1,
                "delay_s": first_answer_delay,
                "reply": [{"text": "noted: banana"}],
            },
            {
                "name": "answer",
                "when": {"last_is_tool_result": True, "tool_result_contains": "banana"},
                "reply": [{"text": "noted: banana"}],
            },
            {
                "name": "conclude",
                "when": {"last_user_contains": "write the conclusion"},
                "reply": [{"text": "conclusion: banana"}],
            },
        ]
    }


def start(tmp_path, srv, **kw) -> Child:
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "ws" / "note.txt").write_text("the fruit is banana\n")
    return Child(tmp_path, srv.env(tmp_path / "cfg"), "run", FLOW, **kw)


def stored(runs, sid: str, text: str) -> bool:
    """Whether sessions.db holds an entry of session `sid` containing `text`."""
    try:
        with sqlite3.connect(f"file:{runs / 'sessions.db'}?mode=ro", uri=True) as db:
            row = db.execute(
                "SELECT 1 FROM entries WHERE store_key LIKE ? AND payload LIKE ? LIMIT 1",
                (f"%/{sid}", f"%{text}%"),
            ).fetchone()
    except sqlite3.Error:
        return False
    return row is not None


def step1_session_known(child: Child, srv) -> str:
    """Wait until lineage.json names step 1's session, the delayed request is in flight and the
    tool result it answers is in sessions.db (the mirror trails the CLI by a few ms)."""

    def ready():
        sid = lineage(child.runs).get("steps", {}).get(STEP1)
        if not sid or not any(r["rule"] == "slow-answer" for r in srv.requests):
            return None
        return sid if stored(child.runs, sid, "the fruit is banana") else None

    sid = wait_until(ready, 90)
    return str(sid)


def assert_continued(tmp_path, srv, sid: str, again: Child) -> None:
    assert again.wait() == 0, again.output
    out = again.output
    assert "Traceback" not in out
    # The wake banner and the step header both say this is the second wake.
    assert "where we left off" in out and "wake #2" in out, out
    assert f"== {STEP1} " in out and "<- continued · wake #2" in out, out
    lin = lineage(tmp_path / "runs")
    assert lin["woke"] == 2
    assert lin["steps"][STEP1] == sid  # the same session, continued
    resumed = [r for r in message_requests(srv) if r["rule"] == "resumed"]
    assert resumed and resumed[-1]["session"] == sid
    # The model saw the earlier turns: the first prompt and the tool result from before the kill.
    seen = texts_of(resumed[-1])
    assert "read the note and remember it" in seen and "the fruit is banana" in seen
    assert "API Error" not in seen
    # ... and the records say so: step 1 continued the session lineage named.
    steps = read_continuity(tmp_path / "runs")
    assert steps is not None and steps[0]["step"] == STEP1 and steps[0]["continued"] is True
    assert steps[0]["session"] == sid and steps[0]["reason"].startswith(f"continued session {sid[:8]}")
    assert exitinfo.read(tmp_path / "runs")["class"] == "done"  # the kill's cause was cleared


def test_sigkill_in_the_middle_of_step_1_then_the_next_run_continues_the_same_session(tmp_path):
    with scripted(tmp_path, scenario(first_answer_delay=60)) as srv:
        child = start(tmp_path, srv)
        try:
            sid = step1_session_known(child, srv)
            killed = child.kill_tree()
            assert len(killed) >= 2  # flower and its CLI
        finally:
            child.cleanup()
        assert lineage(tmp_path / "runs")["woke"] == 1
        assert manifest(tmp_path / "runs") == []  # nothing ran to the end: only lineage knew the id
        again = start(tmp_path, srv)
        try:
            assert_continued(tmp_path, srv, sid, again)
        finally:
            again.cleanup()
    rows = manifest(tmp_path / "runs")
    assert [r["step"] for r in rows] == [STEP1, STEP2]
    assert rows[0]["session_id"] == sid and rows[0]["resumed"] is True and rows[0]["ok"] is True


def test_sigkill_between_steps_then_the_next_run_continues(tmp_path):
    marker = tmp_path / "between"
    with scripted(tmp_path, scenario(first_answer_delay=0)) as srv:
        child = start(tmp_path, srv, extra_env={"FLOWER_TEST_PAUSE_FILE": str(marker)})
        try:
            wait_until(marker.exists, 90)
            sid = lineage(child.runs)["steps"][STEP1]
            first_rows = manifest(child.runs)
            assert [r["step"] for r in first_rows] == [STEP1] and first_rows[0]["ok"]
            child.kill_tree()
        finally:
            child.cleanup()
        again = start(tmp_path, srv)
        try:
            assert_continued(tmp_path, srv, sid, again)
        finally:
            again.cleanup()
    lin = lineage(tmp_path / "runs")
    assert set(lin["steps"]) == {STEP1, STEP2}
    rows = manifest(tmp_path / "runs")
    assert [r["step"] for r in rows] == [STEP1, STEP1, STEP2]  # two runs, rows of both kept
    assert len({r["run"] for r in rows}) == 2


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_rescue_the_in_flight_step_then_the_next_run_continues(tmp_path, sig):
    with scripted(tmp_path, scenario(first_answer_delay=60)) as srv:
        child = start(tmp_path, srv)
        try:
            sid = step1_session_known(child, srv)
            cli = descendants(child.proc.pid)
            assert cli, "the CLI child should be running"
            os.kill(child.proc.pid, sig)  # to flower only, as `kill` or a dying terminal would
            assert child.wait(30) == -sig  # the default action really ran: died of the signal
            wait_until(lambda: not any(alive(p) for p in cli), 10)  # and took no orphan along
        finally:
            child.cleanup()
        rows = manifest(tmp_path / "runs")
        assert len(rows) == 1, rows
        row = rows[0]
        assert row["step"] == STEP1 and row["error"] == "killed-by-signal" and row["ok"] is False
        assert row["session_id"] == sid and row["ended_at"]
        assert "Traceback" not in child.output
        # The cause is left for an orchestrator that only sees the exit status (128 + signal).
        cause = exitinfo.read(tmp_path / "runs")
        assert cause is not None and cause["class"] == "signal" and cause["code"] == 128 + sig
        assert cause["reason"].startswith(f"killed by {signal.Signals(sig).name} during step {STEP1}")
        assert cause["step"] == STEP1
        again = start(tmp_path, srv)
        try:
            assert_continued(tmp_path, srv, sid, again)
        finally:
            again.cleanup()
