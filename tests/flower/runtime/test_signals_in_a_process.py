"""Ctrl-C as a terminal delivers it (SIGINT to the whole foreground process group) to a real
`flower run` child: one Ctrl-C stops at a message boundary and the same session resumes;
two quit, and the in-flight step is not in the manifest. stdin is a pty, so flower asks for an added word like it would in a
terminal. Real CLI, scripted model."""

from __future__ import annotations

import os
import pty
import signal

import pytest

from tests.rig import message_requests, scripted, texts_of
from tests.scripts.child import FLOW, Child, alive, descendants, lineage, manifest, wait_until

pytestmark = pytest.mark.slow

STEP1, STEP2 = "查资料", "写结论"
ASKED = "Add a word?"

SCENARIO = {
    "rules": [
        {
            "name": "kiwi",
            "when": {"last_user_contains": "also mention kiwi"},
            "reply": [{"text": "kiwi mentioned"}],
        },
        {
            "name": "resumed",
            "when": {"last_user_contains": "continue the reading"},
            "reply": [{"text": "resumed"}],
        },
        {
            "name": "read",
            "when": {"last_user_contains": "read the note", "last_is_tool_result": False},
            "reply": [
                {"text": "Reading."},
                {"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/note.txt"}}},
            ],
        },
        # The answer to the tool result streams slowly: a long turn to interrupt.
        {
            "name": "slow-answer",
            "when": {"last_is_tool_result": True, "tool_result_contains": "banana"},
            "times": 1,
            "delay_s": 60,
            "reply": [{"text": "noted: banana"}],
        },
        {
            "name": "conclude",
            "when": {"last_user_contains": "write the conclusion"},
            "reply": [{"text": "conclusion: banana"}],
        },
    ]
}


def start(tmp_path, srv) -> tuple[Child, int]:
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "ws" / "note.txt").write_text("the fruit is banana\n")
    master, slave = pty.openpty()
    child = Child(tmp_path, srv.env(tmp_path / "cfg"), "run", FLOW, stdin=slave)
    os.close(slave)
    return child, master


def in_flight(child: Child, srv) -> str:
    def ready():
        sid = lineage(child.runs).get("steps", {}).get(STEP1)
        return sid if sid and any(r["rule"] == "slow-answer" for r in srv.requests) else None

    return str(wait_until(ready, 90))


def test_one_ctrl_c_interrupts_takes_a_word_and_the_same_session_goes_on(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        child, master = start(tmp_path, srv)
        try:
            sid = in_flight(child, srv)
            cli = descendants(child.proc.pid)
            child.signal_group(signal.SIGINT)  # the terminal's Ctrl-C: flower's whole group
            child.wait_output(ASKED, 30)
            assert all(alive(p) for p in cli)  # the CLI was not hit: it is in its own group
            os.write(master, b"also mention kiwi\n")
            assert child.wait(90) == 0, child.output
        finally:
            child.cleanup()
            os.close(master)
        out = child.output
        assert "Traceback" not in out
        rows = manifest(tmp_path / "runs")
        assert [r["step"] for r in rows] == [STEP1, STEP2]
        first = rows[0]
        # Not a failed attempt, no new session: the same conversation went on with the word.
        assert first["ok"] is True and first["attempts"] == 1 and first["errors"] == []
        assert first["session_id"] == sid and first["text"] == "kiwi mentioned"
        follow = [r for r in message_requests(srv) if r["rule"] == "kiwi"]
        assert len(follow) == 1 and follow[0]["session"] == sid
        assert "read the note and remember it" in texts_of(follow[0])  # same history


def test_ctrl_c_with_no_word_continues_with_the_neutral_resume_prompt(tmp_path):
    scenario = {
        "rules": [
            {
                "name": "go-on",
                "when": {"last_user_contains": "上一轮在中途被中断"},
                "reply": [{"text": "went on"}],
            },
            *SCENARIO["rules"],
        ]
    }
    with scripted(tmp_path, scenario) as srv:
        child, master = start(tmp_path, srv)
        try:
            sid = in_flight(child, srv)
            child.signal_group(signal.SIGINT)
            child.wait_output(ASKED, 30)
            os.write(master, b"\n")  # Enter: just continue
            assert child.wait(90) == 0, child.output
        finally:
            child.cleanup()
            os.close(master)
    first = manifest(tmp_path / "runs")[0]
    assert (
        first["ok"] and first["attempts"] == 1 and first["session_id"] == sid and first["text"] == "went on"
    )


def test_two_ctrl_c_quit_with_130_and_the_next_run_continues(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        child, master = start(tmp_path, srv)
        try:
            sid = in_flight(child, srv)
            cli = descendants(child.proc.pid)
            child.signal_group(signal.SIGINT)
            child.wait_output(ASKED, 30)
            child.signal_group(signal.SIGINT)  # the second press, while flower waits for the word
            assert child.wait(30) == 130, child.output
            wait_until(lambda: not any(alive(p) for p in cli), 10)  # no orphan CLI left running
        finally:
            child.cleanup()
            os.close(master)
        out = child.output
        assert "Traceback" not in out and "interrupted" in out
        assert (
            manifest(tmp_path / "runs") == []
        )  # the in-flight step is not in the manifest: two Ctrl-C quit without a row
        assert lineage(tmp_path / "runs")["steps"][STEP1] == sid  # but lineage has its session
        again = Child(tmp_path, srv.env(tmp_path / "cfg"), "run", FLOW)
        try:
            assert again.wait(90) == 0, again.output
        finally:
            again.cleanup()
    rows = manifest(tmp_path / "runs")
    assert rows[0]["step"] == STEP1 and rows[0]["session_id"] == sid and rows[0]["resumed"] is True
    assert rows[0]["text"] == "resumed"
    assert "wake #2" in again.output
