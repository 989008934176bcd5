"""`flower go` as users (and flower-batch) run it: real subprocesses, no terminal, the real bundled
CLI, the scripted model playing examples/scenarios/starter.toml."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flower.catalogue.starter import WAKE_PROMPT
from flower.scripted import Scenario, ScriptedServer
from tests.rig import message_requests, texts_of

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
STARTER = EXAMPLES / "scenarios" / "starter.toml"
ROLE_MARKS = {"clarify": "## 确认需求", "goal": "## 设定目标", "work": "## 协调规则", "judge": "## 独立判定"}


def flower(
    srv: ScriptedServer | None, cwd: Path, *args: str, stdin: str | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    if srv is not None:
        env.update(srv.env(cwd / "cfg"))
    return subprocess.run(
        [sys.executable, "-m", "flower", *args],
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        timeout=timeout,
    )


def roles(requests: list[dict]) -> list[str]:
    """Which role each logged request came from (by its system prompt)."""
    out = []
    for r in requests:
        system = json.dumps(r["body"].get("system"), ensure_ascii=False)
        out.append(next((name for name, mark in ROLE_MARKS.items() if mark in system), "other"))
    return out


def rows_of_last_run(runs: Path) -> list[str]:
    rows = json.loads((runs / "manifest.json").read_text())
    return [r["step"] for r in rows if r["run"] == rows[-1]["run"]]


@pytest.mark.slow
def test_orchestrator_commands_first_run_silent_wake_words_and_new(tmp_path):
    """Exactly what flower-batch runs: `flower -w WS -r RUNS go --timeout 0 ["words"]`, no TTY."""
    ws, runs = tmp_path / "ws", tmp_path / "runs"
    ws.mkdir()
    notes = ws / ".flower" / "notes"
    base = ["-w", str(ws), "-r", str(runs), "go", "--timeout", "0"]
    with ScriptedServer(Scenario.load(STARTER), log_path=tmp_path / "model.jsonl", keep_requests=True) as srv:
        first = flower(srv, tmp_path, *base, "make hello.txt say hi")
        assert first.returncode == 0, first.stderr
        assert (ws / "hello.txt").read_text() == "hi\n"
        assert rows_of_last_run(runs) == [
            "确认需求",
            "设定目标",
            "干活",
            "干活·判定#1",
            "干活#round2",
            "干活·判定#2",
        ]
        out = first.stdout + first.stderr
        for text in (
            "❓ hello.txt 里只写 hi",
            "fully automatic",
            "work·judge#1: not_yet",  # the starter's steps by their labels (STEP_LABELS)
            "work·judge#2: achieved",
            "done: an independent judge confirmed the goal",
            "offline scripted model",
            "total cost $",
            str(runs / "manifest.json"),
        ):
            assert text in out, text
        assert "Traceback" not in out

        # Silent wake: no words, no terminal. Nothing re-derived, no call for the frozen steps.
        brief, goal = (notes / "需求.md").read_bytes(), (notes / "目标.md").read_bytes()
        seen = len(message_requests(srv))
        silent = flower(srv, tmp_path, *base)
        assert silent.returncode == 0, silent.stderr
        assert (
            "<- back in" in silent.stderr
            and "brief settled · goal: 2 checks" in silent.stderr
            and "wake #2" in silent.stderr
        )
        assert "clarify: settled, skipped" in silent.stderr and "<- continued · wake #2" in silent.stderr
        assert ((notes / "需求.md").read_bytes(), (notes / "目标.md").read_bytes()) == (brief, goal)
        assert rows_of_last_run(runs) == ["干活", "干活·判定#1"]
        assert set(roles(message_requests(srv)[seen:])) == {"work", "judge"}

        # Wake with words: appended to 需求.md, the work step's resume prompt, 目标.md re-derived.
        seen = len(message_requests(srv))
        words = flower(srv, tmp_path, *base, "also add bye.txt")
        assert words.returncode == 0, words.stderr
        assert (
            "## 唤醒时追加" in (notes / "需求.md").read_text()
            and "also add bye.txt" in (notes / "需求.md").read_text()
        )
        assert "bye.txt 存在,内容是 bye" in (notes / "目标.md").read_text()
        assert (ws / "bye.txt").read_text() == "bye\n"
        assert rows_of_last_run(runs) == ["设定目标", "干活", "干活·判定#1"]
        run3 = message_requests(srv)[seen:]
        assert "clarify" not in roles(run3)
        work_first = next(r for r, role in zip(run3, roles(run3), strict=True) if role == "work")
        assert WAKE_PROMPT.format(words="also add bye.txt") in texts_of(work_first)
        lineage = json.loads((runs / "lineage.json").read_text())
        assert lineage["woke"] == 3 and set(lineage["steps"]) == {"确认需求", "设定目标", "干活"}

        # --new: the three files go to notes/archive/<stamp>/ together; a fresh start.
        new = flower(srv, tmp_path, *base, "--new", "--clarify-only", "make hello.txt say hi")
        assert new.returncode == 0, new.stderr
        assert not srv.unmatched
    (archived,) = (notes / "archive").iterdir()
    assert sorted(p.name for p in archived.iterdir()) == ["lineage.json", "目标.md", "需求.md"]
    assert "also add bye.txt" in (archived / "需求.md").read_text()
    lineage = json.loads((runs / "lineage.json").read_text())
    assert lineage["woke"] == 1 and list(lineage["steps"]) == ["确认需求"]
    assert not (notes / "目标.md").exists() and "唤醒时追加" not in (notes / "需求.md").read_text()


@pytest.mark.slow
def test_rounds_run_out_exit_1(tmp_path):
    (tmp_path / "ws").mkdir()
    with ScriptedServer(Scenario.load(STARTER), keep_requests=True) as srv:
        out = flower(srv, tmp_path / "ws", "make hello.txt say hi", "--timeout", "0", "--rounds", "1")
    assert out.returncode == 1, out.stderr
    assert "not finished: stopped at work" in out.stderr and "Traceback" not in out.stderr
    assert rows_of_last_run(tmp_path / "ws" / "runs") == ["确认需求", "设定目标", "干活", "干活·判定#1"]


def test_piped_stdin_goes_to_the_inbox_and_nobody_is_waited_for(tmp_path):
    """No terminal, default --timeout: piped text lands in the inbox and 需求.md; at end of input
    nobody can answer, so the question does not wait 30 minutes."""
    (tmp_path / "ws").mkdir()
    started = time.monotonic()
    with ScriptedServer(Scenario.load(STARTER), keep_requests=True) as srv:
        out = flower(
            srv,
            tmp_path / "ws",
            "make hello.txt say hi",
            "--clarify-only",
            stdin="PIPED-NOTE keep it lowercase\n",
            timeout=120,
        )
    assert out.returncode == 0, out.stderr
    assert time.monotonic() - started < 60
    notes = tmp_path / "ws" / ".flower" / "notes"
    brief = (notes / "需求.md").read_text()
    assert "## 运行中补充" in brief and "PIPED-NOTE keep it lowercase" in brief and "## 未知与假设" in brief
    qa = (notes / "问答记录.md").read_text()
    assert "插话" in qa and "PIPED-NOTE" in qa and "hello.txt 里只写 hi" in qa
    assert "in the inbox (the agent reads it between phases)" in out.stderr


BAD_INPUT = [
    (["--bogus"], "No such option: --bogus"),
    (["go", "x", "--rounds", "0"], "--rounds 0"),
    (["x", "--asks", "-2"], "--asks -2"),
    (["--timeout", "0"], "nothing to continue"),  # a fresh directory, no task, no terminal
    (["--isolate", "x"], "--isolate needs a git repository"),
    (["-w", "missing", "x"], "is not a directory"),
    (["run"], "Missing argument 'target'"),
    (["run", "nowhere.py:main"], "does not exist"),
    (["run", "notflow.py:thing"], "expected a flower.Workflow, got int"),
    (["run", "notflow.py:main", "-w", "."], "has no attribute 'main'"),
    (["run", "notflow"], "expected module:attr or file.py:attr"),
]


@pytest.mark.parametrize(("args", "text"), BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_one_line_errors_and_exit_2(tmp_path, monkeypatch, capsys, args, text):
    from flower.cli.app import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "notflow.py").write_text("thing = 42\n")
    with pytest.raises(SystemExit) as exited:
        main(args)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert exited.value.code == 2, lines
    assert len(lines) == 1 and text in lines[0] and lines[0].startswith("flower:"), lines
    assert not (tmp_path / ".flower").exists() and not (tmp_path / "runs").exists()  # nothing touched


def test_the_installed_entry_point_keeps_errors_to_one_line(tmp_path):
    for args in (["--bogus"], ["run", "nowhere.py:main"]):
        out = flower(None, tmp_path, *args, timeout=60)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert "Traceback" not in out.stderr


def test_run_the_seed_workflow_file(tmp_path):
    ws = tmp_path / "repo"
    ws.mkdir()
    (ws / "seed.txt").write_text("春风\n", encoding="utf-8")
    with ScriptedServer(
        Scenario.load(EXAMPLES / "scenarios" / "starter-flows.toml"), keep_requests=True
    ) as srv:
        out = flower(srv, tmp_path, "run", str(EXAMPLES / "flows.py") + ":main", "-w", str(ws))
        assert not srv.unmatched
    assert out.returncode == 0, out.stderr
    rows = json.loads((tmp_path / "runs" / "manifest.json").read_text())
    assert [(r["step"], r["text"]) for r in rows] == [("取词", "春风"), ("造句", "春风吹绿柳")]
    assert "total cost $" in out.stderr and "manifest" in out.stderr


def test_asks_budget_zero_means_the_question_never_reaches_you(tmp_path):
    (tmp_path / "ws").mkdir()
    with ScriptedServer(Scenario.load(STARTER), keep_requests=True) as srv:
        out = flower(srv, tmp_path / "ws", "make hello.txt say hi", "--clarify-only", "--asks", "0")
    assert out.returncode == 0, out.stderr
    assert "the question budget is spent" in out.stderr
    assert "提问次数已用完" in (tmp_path / "ws" / ".flower" / "notes" / "问答记录.md").read_text()
