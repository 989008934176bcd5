"""Handoff (at a context threshold the session writes a handoff document and a fresh session
takes over; lineage records the successor): the threshold crossed through the scenario's usage numbers, the document, the
successor, lineage and `retired[]`; the degraded handoff on a real CLI overflow; the generation cap."""

from __future__ import annotations

import json

import pytest

from flower import AgentSpec, Step, Workflow
from flower.context.handoff import Handoff, doc_path, is_overflow, missing_sections
from flower.runtime.engine import Runtime
from tests.rig import message_requests, scripted, texts_of

SPEC = AgentSpec("worker", instructions="ROLE=worker", allowed_tools=["Read"])
TASK = "build the thing"

DOC = """## 现在在做什么
在 build the thing, 读完了 note.txt。

## 已经定下的
水果是 banana。

## 走不通的路
没有。

## 下一步
写出结论 FINAL-BANANA。

## 现场
note.txt 在工作区根目录。
"""


def rules(work_usage: int, *, successor_reply: list[dict] | None = None) -> list[dict]:
    return [
        {
            "name": "successor",
            "when": {"last_user_contains": "你在接手一个进行中的任务"},
            "usage": {"input_tokens": 900},
            "reply": successor_reply or [{"text": "finished after handoff"}],
        },
        {
            "name": "doc",
            "when": {"last_user_contains": "现在写交接文档"},
            "usage": {"input_tokens": 12_400},
            "reply": [{"text": DOC}],
        },
        {
            "name": "wake",
            "when": {"last_user_contains": "continue the build"},
            "reply": [{"text": "woke up"}],
        },
        {
            "name": "work",
            "when": {"last_user_contains": TASK, "last_is_tool_result": False},
            "usage": {"input_tokens": work_usage},
            "reply": [
                {"text": "Started."},
                {"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/note.txt"}}},
            ],
        },
        {
            "name": "after-tool",
            "when": {"last_is_tool_result": True},
            "delay_s": 2,
            "reply": [{"text": "the work went on without a handoff"}],
        },
    ]


def runtime(tmp_path, srv, handoff) -> Runtime:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "note.txt").write_text("the fruit is banana\n")
    return Runtime(
        workspace=ws,
        run_dir=tmp_path / "runs",
        env=srv.env(tmp_path / "cfg"),
        resilience=False,
        handoff=handoff,
    )


# -- the numbers (pure logic) -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "room", "at", "warn"),
    [
        (200_000, 50_000, 150_000, 130_000),
        (1_000_000, 250_000, 750_000, 730_000),
        (60_000, 50_000, 10_000, 1_000),
        (20_000, 50_000, 10_000, 1_000),
    ],
)
def test_threshold_numbers_are_upstreams(window, room, at, warn):
    h = Handoff(window=window)
    assert (h.room, h.at, h.warn_at) == (room, at, warn)
    assert h.due(at) and not h.due(at - 1)
    assert not Handoff(enabled=False, window=window).due(10**9)


def test_policy_values_and_env():
    assert Handoff.from_value(True).enabled and not Handoff.from_value(False).enabled
    assert Handoff.from_value(True).max_generations == 8
    assert Handoff(window=1000).cli_env() == {"DISABLE_AUTO_COMPACT": "1"}
    assert Handoff(enabled=False).cli_env() == {}
    with pytest.raises(ValueError, match="window"):
        Handoff(window=0)
    with pytest.raises(TypeError):
        Handoff.from_value("yes")  # type: ignore[arg-type]


def test_overflow_detection_and_document_helpers(tmp_path):
    assert is_overflow("Prompt is too long")
    assert is_overflow(None, "blocking_limit") and is_overflow("", "prompt_too_long")
    assert not is_overflow("API Error: 500 Internal server error", "api_error")
    assert doc_path(tmp_path, "干活#round2") == tmp_path / "交接-干活.md"
    assert doc_path(tmp_path, "干活·判定#1").name == "交接-干活.md"
    assert missing_sections(DOC) == []
    assert missing_sections("## 现在在做什么\n写代码\n## 下一步\n\n") == ["下一步"]


def test_auto_compact_is_forced_off_while_handoff_is_on(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    on = Runtime(workspace=ws, run_dir=tmp_path / "a", handoff=True)
    off = Runtime(workspace=ws, run_dir=tmp_path / "b", handoff=False)
    spec = AgentSpec("x", env={"DISABLE_AUTO_COMPACT": "0"})
    try:
        assert on._options(spec, None, False, None).env["DISABLE_AUTO_COMPACT"] == "1"
        assert "DISABLE_AUTO_COMPACT" not in off._options(AgentSpec("x"), None, False, None).env
        assert (
            off._options(AgentSpec("x", compact=False), None, False, None).env["DISABLE_AUTO_COMPACT"] == "1"
        )
    finally:
        on.close()
        off.close()


# -- on the real CLI ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_crossing_the_threshold_hands_over_to_a_successor_that_lineage_records(tmp_path):
    events: list[tuple[str, dict]] = []
    scenario = {"rules": rules(work_usage=12_000)}
    with scripted(tmp_path, scenario) as srv:
        rt = runtime(tmp_path, srv, Handoff(window=60_000))  # at = 10_000 tokens
        try:
            ctx = await Workflow([Step("干活", SPEC, TASK, resume_prompt="continue the build")]).run(
                rt, on_event=lambda k, p: events.append((k, p))
            )
        finally:
            rt.close()
        reqs = message_requests(srv)
        res = ctx["_results"]["干活"]
        assert res.ok, res.errors
        assert res.text == "finished after handoff"
        assert len(res.retired) == 1 and res.retired[0] != res.session_id
        old, new = res.retired[0], res.session_id
        # The document the full session wrote, where upstream puts it.
        path = rt.workspace / ".flower" / "notes" / "交接-干活.md"
        doc = path.read_text(encoding="utf-8")
        assert "## 下一步\n写出结论 FINAL-BANANA。" in doc and missing_sections(doc) == []
        # It was asked of the old session; the successor is a fresh session seeded with it.
        assert next(r for r in reqs if r["rule"] == "doc")["session"] == old
        first = next(r for r in reqs if r["rule"] == "successor")
        assert first["session"] == new
        seen = texts_of(first)
        assert "FINAL-BANANA" in seen and TASK in seen and str(path) in seen
        assert "Started." not in seen  # no history: a new session, not a resume
        kinds = [k for k, _ in events]
        assert kinds.index("handoff-due") < kinds.index("handoff")
        # Lineage records the successor; the manifest row lists the retired session.
        assert ctx["_lineage"].steps["干活"] == new
        assert json.loads((tmp_path / "runs" / "lineage.json").read_text())["steps"]["干活"] == new
        row = json.loads(rt.manifest_path.read_text())[0]
        assert row["retired"] == [old] and row["session_id"] == new and row["attempts"] == 1

        # The next wake continues the successor, not the retired session.
        rt2 = runtime(tmp_path, srv, Handoff(window=60_000))
        try:
            ctx2 = await Workflow([Step("干活", SPEC, TASK, resume_prompt="continue the build")]).run(rt2)
        finally:
            rt2.close()
        woke = ctx2["_results"]["干活"]
        assert woke.ok and woke.text == "woke up" and woke.session_id == new and woke.retired == []
        assert next(r for r in message_requests(srv) if r["rule"] == "wake")["session"] == new


@pytest.mark.anyio
async def test_an_overflow_error_gives_a_degraded_handoff(tmp_path):
    """With auto-compact off, CLI 2.1.327 refuses locally ("Prompt is too long",
    terminal_reason blocking_limit) once the context is near a known model's window: the
    session cannot write anything, so the runtime writes the document itself."""
    spec = AgentSpec("worker", allowed_tools=["Read"], model="claude-sonnet-4-5")
    scenario = {
        "rules": rules(work_usage=195_000, successor_reply=[{"text": "finished after degraded handoff"}])
    }
    with scripted(tmp_path, scenario) as srv:
        rt = runtime(tmp_path, srv, Handoff(window=1_000_000))  # our threshold is never reached
        try:
            res = await rt.run(spec, TASK, step_name="干活")
        finally:
            rt.close()
        reqs = message_requests(srv)
    assert res.ok, res.errors
    assert res.text == "finished after degraded handoff"
    assert len(res.retired) == 1
    assert [r["rule"] for r in reqs] == ["work", "successor"]  # the overflowing request never left the CLI
    doc = (rt.workspace / ".flower" / "notes" / "交接-干活.md").read_text(encoding="utf-8")
    assert "降级交接" in doc and TASK in doc and "Read" in doc and "Prompt is too long" in doc
    assert missing_sections(doc) == []
    assert "降级交接" in texts_of(reqs[-1])


@pytest.mark.anyio
@pytest.mark.slow
async def test_generations_are_capped(tmp_path):
    # Every session crosses the threshold at once; after 2 handoffs the third one must finish.
    successor = [{"text": "again."}, {"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/note.txt"}}}]
    scenario = {"rules": rules(work_usage=12_000, successor_reply=successor)}
    scenario["rules"][0]["usage"] = {"input_tokens": 12_000}
    with scripted(tmp_path, scenario) as srv:
        rt = runtime(tmp_path, srv, Handoff(window=60_000, max_generations=2))
        try:
            res = await rt.run(SPEC, TASK, step_name="干活")
        finally:
            rt.close()
    assert res.ok and len(res.retired) == 2 and len(set(res.retired + [res.session_id])) == 3
    assert res.text == "the work went on without a handoff"


@pytest.mark.anyio
async def test_a_session_that_writes_the_document_itself_is_taken_at_its_word(tmp_path):
    spec = AgentSpec("worker", allowed_tools=["Read", "Write"], permission_mode="acceptEdits")
    scenario = {"rules": rules(work_usage=12_000)}
    scenario["rules"][1] = {  # the document comes as a Write call, the reply is just "done"
        "name": "doc",
        "when": {"last_user_contains": "现在写交接文档"},
        "times": 1,
        "reply": [
            {
                "tool_use": {
                    "name": "Write",
                    "input": {"file_path": "{cwd}/.flower/notes/交接-干活.md", "content": DOC},
                }
            }
        ],
    }
    scenario["rules"].insert(
        1,
        {
            "name": "doc-written",
            "when": {"last_is_tool_result": True, "tool_result_contains": "交接-干活.md"},
            "usage": {"input_tokens": 12_600},
            "reply": [{"text": "done"}],
        },
    )
    with scripted(tmp_path, scenario) as srv:
        rt = runtime(tmp_path, srv, Handoff(window=60_000))
        try:
            res = await rt.run(spec, TASK, step_name="干活")
        finally:
            rt.close()
        rules_seen = [r["rule"] for r in message_requests(srv)]
    assert res.ok and res.text == "finished after handoff" and len(res.retired) == 1
    assert "doc-written" in rules_seen
    doc = (rt.workspace / ".flower" / "notes" / "交接-干活.md").read_text(encoding="utf-8")
    assert doc == DOC  # the session's own file, not overwritten by a degraded one
