"""Continuity in one process: lineage, wake_state, the banner, --new,
and every way a lineage can fail to match (each one: start fresh, no error). Real CLI where a
session is involved, plain logic elsewhere."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from flower import AgentSpec, Lineage, Step, Workflow
from flower.starter.wake import banner, format_tokens, start_over, step_header, wake_line, wake_state
from tests.rig import message_requests, runtime, scripted, texts_of

SPEC = AgentSpec("worker", instructions="ROLE=worker", allowed_tools=["Read"])
JUDGE = AgentSpec("judge", instructions="ROLE=judge", allowed_tools=["Read"])

SCENARIO = {
    "rules": [
        {
            "name": "judge",
            "when": {"system_contains": "ROLE=judge"},
            "reply": [{"text": "verdict: achieved"}],
        },
        {
            "name": "again",
            "when": {"last_user_contains": "continue the work"},
            "reply": [{"text": "continued"}],
        },
        {
            "name": "work",
            "when": {"last_user_contains": "do the work"},
            "usage": {
                "input_tokens": 80_000,
                "cache_read_input_tokens": 200,
                "cache_creation_input_tokens": 13,
            },
            "reply": [{"text": "worked"}],
        },
    ]
}

BRIEF = """# 需求确认书

## 目标
写一个 md 转 html 的脚本

## 验收标准
hello.md 转出 hello.html

## 边界
只用标准库

## 未知与假设
(未填)
"""
BRIEF_COMPLETE = BRIEF.replace("(未填)", "假设 UTF-8")
GOAL = """# 目标
md 转 html

# 判定清单
- 有 md2html.py
- hello.html 存在
- 只用标准库
"""


def work_flow(**kw) -> Workflow:
    return Workflow([Step("干活", SPEC, "do the work", resume_prompt="continue the work")], **kw)


def snapshot(*dirs: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for d in dirs:
        for p in sorted(d.rglob("*")):
            if p.is_file():
                st = p.stat()
                out[str(p)] = (st.st_size, st.st_mtime_ns)
    return out


# -- lineage and wake on the real CLI -------------------------------------------------------------


@pytest.mark.anyio
async def test_second_process_continues_same_session_and_wake_reports_it(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        seen_at_session_event: list[dict] = []

        def on_event(kind, payload):
            if kind == "session":  # invariant 1: lineage.json already has the id at this moment
                seen_at_session_event.append(json.loads((tmp_path / "runs" / "lineage.json").read_text()))

        rt = runtime(tmp_path, srv)
        try:
            first = await work_flow().run(rt, on_event=on_event)
        finally:
            rt.close()
        sid = first["_sessions"]["干活"]
        assert first["_woke"] == 1
        assert seen_at_session_event and seen_at_session_event[0]["steps"] == {"干活": sid}

        ws, runs = rt.workspace, rt.run_dir
        (ws / "需求.md").write_text(BRIEF_COMPLETE, encoding="utf-8")
        (ws / "目标.md").write_text(GOAL, encoding="utf-8")
        before = snapshot(ws, runs)
        state = wake_state(ws, run_dir=runs)
        assert snapshot(ws, runs) == before  # read-only: not one byte written, no file created
        assert state["waking"] is True and state["checks"] == 3 and state["goal"] == "md 转 html"
        assert state["brief"]["边界"] == "只用标准库"
        assert state["woke"] == 1 and state["steps"] == {"干活": sid}
        line = wake_line(ws, run_dir=runs, state=state)
        assert (
            line
            == f"<- back in {ws} where we left off  brief settled · goal: 3 checks · work context 80.2K · wake #2"
        )
        assert snapshot(ws, runs) == before

        headers: list[str] = []
        rt2 = runtime(tmp_path, srv)
        try:
            second = await work_flow().run(
                rt2,
                on_event=lambda k, p: (
                    headers.append(
                        step_header(p["name"], p["index"], p["total"], resumed=p["resumed"], woke=p["woke"])
                    )
                    if k == "step"
                    else None
                ),
            )
        finally:
            rt2.close()
        assert second["_woke"] == 2 and second["_sessions"]["干活"] == sid
        assert (
            second["_results"]["干活"].text == "continued"
        )  # Step.resume_prompt was sent, not the prompt: it is what continuing says
        assert headers == ["== 干活 " + "=" * 32 + "  1/1  <- continued · wake #2"]
        last = message_requests(srv)[-1]
        assert last["session"] == sid and "do the work" in texts_of(last) and "worked" in texts_of(last)


@pytest.mark.anyio
async def test_resume_works_from_sessions_db_alone_after_the_config_dir_is_deleted(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        try:
            sid = (await work_flow().run(rt))["_sessions"]["干活"]
        finally:
            rt.close()
        shutil.rmtree(tmp_path / "cfg")  # the CLI's own transcripts are gone
        shutil.rmtree(rt.config_dir, ignore_errors=True)
        rt2 = runtime(tmp_path, srv)
        try:
            ctx = await work_flow().run(rt2)
        finally:
            rt2.close()
        res = ctx["_results"]["干活"]
        assert res.ok and res.session_id == sid and res.text == "continued"
        assert "worked" in texts_of(message_requests(srv)[-1])  # history came from sessions.db


@pytest.mark.anyio
@pytest.mark.parametrize("damage", ["moved", "db-deleted", "truncated", "not-json", "wrong-types"])
async def test_whatever_does_not_match_starts_fresh_without_error(tmp_path, damage):
    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        try:
            sid = (await work_flow().run(rt))["_sessions"]["干活"]
        finally:
            rt.close()
        lineage_file = tmp_path / "runs" / "lineage.json"
        kw = {}
        if damage == "moved":  # the project copied elsewhere: the workspace guard refuses it
            shutil.copytree(tmp_path / "ws", tmp_path / "moved")
            kw["workspace"] = tmp_path / "moved"
        elif damage == "db-deleted":
            for p in (tmp_path / "runs").glob("sessions.db*"):
                p.unlink()
        elif damage == "truncated":
            lineage_file.write_text(lineage_file.read_text()[:25])
        elif damage == "not-json":
            lineage_file.write_text("这不是 JSON\n")
        else:
            lineage_file.write_text(json.dumps({"workspace": ["x"], "woke": "two", "steps": [sid]}))
        from flower.runtime.engine import Runtime

        ws = kw.get("workspace", tmp_path / "ws")
        rt2 = Runtime(
            workspace=ws, run_dir=tmp_path / "runs", env=srv.env(tmp_path / "cfg"), resilience=False
        )
        try:
            ctx = await work_flow().run(rt2)
        finally:
            rt2.close()
    res = ctx["_results"]["干活"]
    assert res.ok and res.error is None
    assert res.session_id != sid and not res.resumed and res.text == "worked"  # a fresh session
    # The wake count belongs to the directory: only a lineage that does not match resets it.
    assert ctx["_woke"] == (2 if damage == "db-deleted" else 1)
    saved = json.loads(lineage_file.read_text())
    assert saved["steps"] == {"干活": res.session_id} and saved["workspace"] == str(Path(ws).resolve())


@pytest.mark.anyio
async def test_a_judge_like_gate_never_enters_lineage(tmp_path):
    async def gate(result, ctx):
        verdict = await ctx["_runtime"].run(JUDGE, "judge the work", step_name="干活·判定#1")
        gate.judge_sid = verdict.session_id
        return verdict.text == "verdict: achieved"

    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        try:
            ctx = await work_flow().run(rt)  # first wake: a plain run
            wf = Workflow([Step("干活", SPEC, "do the work", resume_prompt="continue the work", gate=gate)])
            ctx = await wf.run(rt)
        finally:
            rt.close()
    work_sid = ctx["_sessions"]["干活"]
    assert gate.judge_sid and gate.judge_sid != work_sid
    saved = json.loads((tmp_path / "runs" / "lineage.json").read_text())
    assert saved["steps"] == {"干活": work_sid}
    assert [r.step for r in rt.results] == ["干活", "干活", "干活·判定#1"]


@pytest.mark.anyio
async def test_continuous_false_starts_fresh_every_process(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        sids = []
        for _ in range(2):
            rt = runtime(tmp_path, srv)
            try:
                sids.append((await work_flow(continuous=False).run(rt))["_sessions"]["干活"])
            finally:
                rt.close()
    assert sids[0] != sids[1]
    assert not (tmp_path / "runs" / "lineage.json").exists()


# -- pure logic --------------------------------------------------------------------------------


def test_lineage_load_survives_every_bad_shape(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    path = tmp_path / "lineage.json"
    good = {"workspace": str(ws.resolve()), "woke": 3, "steps": {"a": "sid-a", "b": "sid-b"}}
    for raw in [
        "",
        "{",
        "null",
        "[]",
        "42",
        json.dumps({**good, "workspace": "/elsewhere"}),
        json.dumps({**good, "woke": -1, "steps": {"a": 7, "": "x"}}),
        json.dumps({**good, "steps": "sid-a"}),
    ]:
        path.write_text(raw)
        lin = Lineage.load(tmp_path, ws, lambda sid: True)
        assert lin.woke in (0, 3) and set(lin.steps) <= {""}, raw
    path.write_text(json.dumps(good))

    def has_session(sid):
        if sid == "sid-b":
            raise RuntimeError("database is locked")
        return sid == "sid-a"

    lin = Lineage.load(tmp_path, ws, has_session)
    assert lin.woke == 3 and lin.steps == {"a": "sid-a"}  # dead and unreadable ids dropped silently


def test_suffixed_names_never_enter_lineage_and_writes_are_atomic(tmp_path):
    lin = Lineage(tmp_path, tmp_path)
    for name in ("a#retry1", "a#round2", "a·判定#1"):
        lin.record(name, "sid")
    assert lin.steps == {} and not lin.path.exists()
    lin.record("a", "sid-1")
    assert json.loads(lin.path.read_text())["steps"] == {"a": "sid-1"}
    assert not list(tmp_path.glob("*.tmp"))
    (tmp_path / "blocked").mkdir()
    Lineage(tmp_path / "blocked" / "lineage.json", tmp_path).record("a", "sid")  # OSError swallowed


def test_banner_parts_and_header():
    state = {"waking": False, "brief": None, "goal": None, "checks": 0, "woke": 0, "steps": {"s": "x"}}
    assert banner(state, workspace="/srv/proj") == "<- back in /srv/proj where we left off  wake #1"
    state.update(waking=True, checks=15, woke=2)
    assert banner(state, workspace="/srv/proj", context=80_213) == (
        "<- back in /srv/proj where we left off  brief settled · goal: 15 checks · work context 80.2K · wake #3"
    )
    assert banner(state, workspace=Path.home() / "proj", context=950, context_step="查资料").startswith(
        "<- back in ~/proj where we left off"
    )
    assert [format_tokens(n) for n in (950, 80_213, 1_234_567)] == ["950", "80.2K", "1.23M"]
    assert step_header("干活", 3, 3, resumed=True, woke=3) == (
        "== 干活 " + "=" * 32 + "  3/3  <- continued · wake #3"
    )  # 40 columns before the count
    assert step_header("write", 1, 2) == "== write " + "=" * 31 + "  1/2"


def test_wake_state_of_an_empty_directory_writes_nothing(tmp_path):
    state = wake_state(tmp_path, run_dir=tmp_path / "runs")
    assert state == {"waking": False, "brief": None, "goal": None, "checks": 0, "woke": 0, "steps": {}}
    assert list(tmp_path.iterdir()) == []
    assert wake_line(tmp_path, run_dir=tmp_path / "runs") is None


def test_brief_in_the_workbench_notes_and_an_incomplete_brief(tmp_path):
    notes = tmp_path / ".flower" / "notes"
    notes.mkdir(parents=True)
    (notes / "需求.md").write_text(BRIEF, encoding="utf-8")  # 未知与假设 empty: not frozen
    state = wake_state(tmp_path, run_dir=tmp_path / "runs")
    assert state["waking"] is False and state["brief"]["目标"] == "写一个 md 转 html 的脚本"


@pytest.mark.anyio
async def test_start_over_archives_the_three_files_and_leaves_sessions_db(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        try:
            await work_flow().run(rt)
        finally:
            rt.close()
    ws, runs = rt.workspace, rt.run_dir
    (ws / "需求.md").write_text(BRIEF_COMPLETE, encoding="utf-8")
    (ws / "目标.md").write_text(GOAL, encoding="utf-8")
    db = (runs / "sessions.db").read_bytes()
    dest = start_over(ws, run_dir=runs)
    again = start_over(ws, run_dir=runs)  # a second --new in the same second gets its own folder
    assert dest.parent == ws / ".flower" / "notes" / "archive" and again != dest
    assert sorted(p.name for p in dest.iterdir()) == ["lineage.json", "目标.md", "需求.md"]
    assert not (ws / "需求.md").exists() and not (runs / "lineage.json").exists()
    assert (runs / "sessions.db").read_bytes() == db
    state = wake_state(ws, run_dir=runs)
    assert state["woke"] == 0 and state["steps"] == {} and not state["waking"]
