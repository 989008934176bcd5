"""HumanChannel: asking, answering from other threads, budget, inbox, log — and the real CLI."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from flower.catalogue.channel import BUDGET_SPENT, DECLINED, INBOX_EMPTY, NO_ANSWER
from flower.spec import AgentSpec
from flower.starter.brief import parse_brief
from flower.starter.channel import ASK_TOOL, INBOX_TOOL, HumanChannel, read_line
from tests.rig import message_requests, runtime, scripted, texts_of

pytestmark = pytest.mark.anyio


def make(tmp_path, **kw) -> HumanChannel:
    kw.setdefault("timeout_s", 5.0)
    return HumanChannel(log_path=tmp_path / "notes" / "问答记录.md", **kw)


def answer_soon(ch: HumanChannel, text: str | None, delay: float = 0.05) -> threading.Thread:
    """Answer (or decline, text=None) from another thread once a question is waiting."""

    def run() -> None:
        deadline = time.monotonic() + 5
        while ch.pending is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(delay)
        ch.answer(text) if text is not None else ch.decline()

    t = threading.Thread(target=run)
    t.start()
    return t


# -- asking ---------------------------------------------------------------------------------


async def test_fully_automatic_nobody_answers_and_it_is_logged(tmp_path):
    ch = make(tmp_path, timeout_s=0, ask_fn=lambda q, t: pytest.fail("must not ask anyone"))
    started = time.monotonic()
    assert await ch.ask("What greeting?") is None
    assert time.monotonic() - started < 1
    log = ch.log_path.read_text(encoding="utf-8")
    assert log.startswith("# 问答记录")
    assert "### 问 1 · " in log and "What greeting?" in log and "全自动模式" in log
    assert ch.exchanges[0].tool_text() == NO_ANSWER


async def test_sync_and_async_ask_fn(tmp_path):
    seen = []

    def sync_fn(q, t):
        seen.append((q, t))
        return "  blue  "

    async def async_fn(q, t):
        await asyncio.sleep(0.01)
        return f"async answer to {q}"

    assert await make(tmp_path, ask_fn=sync_fn, timeout_s=7).ask("color?") == "blue"
    assert seen == [("color?", 7.0)]
    assert await make(tmp_path, ask_fn=async_fn).ask("size?") == "async answer to size?"
    log = (tmp_path / "notes" / "问答记录.md").read_text(encoding="utf-8")
    assert "**答**" in log and "blue" in log and "async answer to size?" in log
    assert log.count("# 问答记录") == 1  # the header is written once, later channels append


async def test_ask_fn_empty_means_declined_none_means_nobody(tmp_path):
    ch = make(tmp_path, ask_fn=lambda q, t: "")
    assert await ch.ask("a?") is None
    assert ch.exchanges[-1].status == "declined" and ch.exchanges[-1].tool_text() == DECLINED
    ch = make(tmp_path, ask_fn=lambda q, t: None)
    assert await ch.ask("b?") is None
    assert ch.exchanges[-1].tool_text() == NO_ANSWER


async def test_broken_ask_fn_counts_as_no_answer(tmp_path):
    def broken(q, t):
        raise RuntimeError("terminal exploded")

    ch = make(tmp_path, ask_fn=broken)
    assert await ch.ask("x?") is None
    assert ch.exchanges[-1].status == "timeout"


async def test_answer_and_decline_from_another_thread(tmp_path):
    ch = make(tmp_path, ask_fn=False)
    t = answer_soon(ch, "use red")
    assert await ch.ask("color?") == "use red"
    t.join()
    t = answer_soon(ch, None)
    assert await ch.ask("size?") is None
    t.join()
    assert [e.status for e in ch.exchanges] == ["answered", "declined"]
    assert ch.pending is None
    assert ch.answer("late") is False and ch.decline() is False


async def test_timeout_then_late_answer_is_ignored(tmp_path):
    ch = make(tmp_path, ask_fn=False, timeout_s=0.2)
    started = time.monotonic()
    assert await ch.ask("anyone?") is None
    assert 0.15 < time.monotonic() - started < 2
    assert ch.exchanges[-1].status == "timeout"
    assert ch.answer("too late") is False
    assert await ch.ask("override", timeout_s=0) is None  # per-call timeout


async def test_first_outcome_wins_between_asker_and_answer(tmp_path):
    release = threading.Event()

    def slow_terminal(q, t):
        release.wait(5)
        return "from terminal"

    ch = make(tmp_path, ask_fn=slow_terminal)
    t = answer_soon(ch, "from ui")
    assert await ch.ask("who?") == "from ui"
    release.set()
    t.join()
    await asyncio.sleep(0.05)
    assert ch.exchanges[-1].answer == "from ui"


async def test_concurrent_questions_are_answered_oldest_first(tmp_path):
    ch = make(tmp_path, ask_fn=False)

    def answer_all() -> None:
        answered = 0
        deadline = time.monotonic() + 5
        while answered < 3 and time.monotonic() < deadline:
            question = ch.pending
            if question is not None and ch.answer(f"answer to {question}"):
                answered += 1
            time.sleep(0.01)

    async def ask(q: str, delay: float) -> str | None:
        await asyncio.sleep(delay)
        return await ch.ask(q)

    t = threading.Thread(target=answer_all)
    t.start()
    got = await asyncio.gather(ask("q1", 0), ask("q2", 0.01), ask("q3", 0.02))
    t.join()
    assert got == ["answer to q1", "answer to q2", "answer to q3"]


def test_an_answered_question_is_no_longer_pending_before_its_asker_takes_it(tmp_path):
    # Seen in CI: the answering thread read q1 again before q1's asker had run, and its second
    # answer (meant for q1) went to q2.
    ch = make(tmp_path, ask_fn=False)
    loop = asyncio.new_event_loop()
    try:
        asks = [loop.create_task(ch.ask(q)) for q in ("q1", "q2")]
        loop.run_until_complete(asyncio.sleep(0.05))  # both are waiting now
        assert ch.pending == "q1" and ch.answer("a1")
        assert ch.pending == "q2"  # q1's asker has not run yet
        assert ch.answer("a2") and ch.pending is None
        assert loop.run_until_complete(asyncio.gather(*asks)) == ["a1", "a2"]
    finally:
        loop.close()


async def test_events_are_emitted_and_a_broken_hook_is_harmless(tmp_path):
    events = []

    async def hook(kind, payload):
        events.append((kind, payload["question"], payload.get("status")))

    ch = make(tmp_path, timeout_s=0, on_event=hook)
    await ch.ask("q?")
    assert events == [("ask", "q?", None), ("answer", "q?", "auto")]

    def broken(kind, payload):
        raise ValueError("display broke")

    ch = make(tmp_path, timeout_s=0, on_event=broken)
    assert await ch.ask("still fine?") is None


async def test_cancelled_ask_is_logged_and_cleared(tmp_path):
    ch = make(tmp_path, ask_fn=False, timeout_s=30)
    task = asyncio.ensure_future(ch.ask("will be cut"))
    await asyncio.sleep(0.05)
    assert ch.pending == "will be cut"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ch.pending is None
    assert ch.exchanges[-1].status == "cancelled"
    assert "提问被中断" in ch.log_path.read_text(encoding="utf-8")


async def test_unwritable_log_does_not_break_asking(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    ch = HumanChannel(log_path=blocker / "log.md", timeout_s=0)
    assert await ch.ask("q?") is None
    assert "q?" in ch.transcript()


# -- inbox, amend, deliver --------------------------------------------------------------------


def test_send_queues_logs_and_amends_the_brief(tmp_path):
    brief = tmp_path / "需求.md"
    ch = make(tmp_path, amend_path=brief)
    ch.send("also make it blue")
    ch.send("   ")  # blank lines are ignored
    ch.send("and add bye.txt")
    assert ch.inbox() == ["also make it blue", "and add bye.txt"]
    assert ch.inbox() == []
    log = ch.log_path.read_text(encoding="utf-8")
    assert log.count("### 插话 · ") == 2
    added = parse_brief(brief.read_text(encoding="utf-8")).appendix["运行中补充"]
    assert "also make it blue" in added and "and add bye.txt" in added


def test_amend_without_brief_path_is_a_no_op(tmp_path):
    ch = make(tmp_path)
    assert ch.amend("x") is None
    ch.send("y")
    assert not (tmp_path / "需求.md").exists()


async def test_deliver_answers_a_waiting_question_else_queues(tmp_path):
    ch = make(tmp_path, ask_fn=False)
    assert ch.deliver("no question yet") == "inbox"

    def later() -> None:
        while ch.pending is None:
            time.sleep(0.01)
        assert ch.deliver("the answer") == "answer"

    t = threading.Thread(target=later)
    t.start()
    assert await ch.ask("q?") == "the answer"
    t.join()
    assert ch.inbox() == ["no question yet"]


def test_send_is_thread_safe(tmp_path):
    ch = make(tmp_path)

    def sender(i: int) -> None:
        for j in range(50):
            ch.send(f"{i}:{j}")

    threads = [threading.Thread(target=sender, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = ch.inbox()
    assert len(got) == 400
    for i in range(8):
        assert [m for m in got if m.startswith(f"{i}:")] == [f"{i}:{j}" for j in range(50)]
    assert ch.log_path.read_text(encoding="utf-8").count("### 插话") == 400


def test_negative_max_asks_means_unlimited_and_tool_names(tmp_path):
    ch = make(tmp_path, max_asks=-1)
    assert ch.max_asks is None
    assert ch.tool_names == [ASK_TOOL, INBOX_TOOL] == ["mcp__human__ask", "mcp__human__inbox"]
    servers = ch.mcp_servers()
    assert list(servers) == ["human"] and servers["human"]["type"] == "sdk"
    assert ch.mcp_servers()["human"] is servers["human"]  # built once


def test_read_line_from_a_terminal_like_fd():
    r, w = os.pipe()
    try:
        os.write(w, "绿色\nrest".encode())
        assert read_line(r, time.monotonic() + 2, threading.Event()) == "绿色"
        assert read_line(r, time.monotonic() + 0.1, threading.Event()) is None  # no newline: deadline
        stop = threading.Event()
        stop.set()
        assert read_line(r, time.monotonic() + 5, stop) is None
    finally:
        os.close(r)
        os.close(w)


# -- the real CLI ------------------------------------------------------------------------------

ASK_SCENARIO = {
    "rules": [
        {
            "name": "ask",
            "when": {"last_user_contains": "make hello", "last_is_tool_result": False},
            "reply": [{"tool_use": {"name": "mcp__human__ask", "input": {"question": "What greeting?"}}}],
        },
        {
            "name": "ask-again",
            "when": {"tool_result_contains": "没有人会回答"},
            "reply": [{"tool_use": {"name": "mcp__human__ask", "input": {"question": "And the color?"}}}],
        },
        {
            "name": "inbox",
            "when": {"tool_result_contains": "提问次数已用完"},
            "reply": [{"tool_use": {"name": "mcp__human__inbox", "input": {}}}],
        },
        {
            "name": "final",
            "when": {"last_is_tool_result": True},
            "reply": [{"text": "assuming hi; noted the inbox"}],
        },
    ]
}


async def test_real_cli_ask_nobody_answers_budget_and_inbox(tmp_path):
    brief = tmp_path / "需求.md"
    ch = HumanChannel(log_path=tmp_path / "qa.md", timeout_s=0, max_asks=1, amend_path=brief)
    ch.send("also make it blue")
    spec = AgentSpec("asker", allowed_tools=["Read"] + ch.tool_names, mcp_servers=ch.mcp_servers())
    with scripted(tmp_path, ASK_SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        try:
            result = await rt.run(spec, "make hello")
        finally:
            rt.close()
        reqs = message_requests(srv)
    assert result.ok, result.error
    assert [c["name"] for c in result.tool_calls] == [
        "mcp__human__ask",
        "mcp__human__ask",
        "mcp__human__inbox",
    ]
    assert [r["rule"] for r in reqs] == ["ask", "ask-again", "inbox", "final"]
    tools = [t["name"] for t in reqs[0]["body"]["tools"]]
    assert "mcp__human__ask" in tools and "mcp__human__inbox" in tools
    assert NO_ANSWER in texts_of(reqs[1])  # the model is told nobody will answer
    assert BUDGET_SPENT in texts_of(reqs[2])  # max_asks=1: the second question is refused
    assert "also make it blue" in texts_of(reqs[3])
    log = (tmp_path / "qa.md").read_text(encoding="utf-8")
    assert "What greeting?" in log and "全自动模式" in log
    assert "And the color?" in log and "提问次数已用完" in log
    assert "also make it blue" in parse_brief(brief.read_text(encoding="utf-8")).appendix["运行中补充"]
    assert ch.asks_used == 2 and ch.inbox() == []
    assert INBOX_EMPTY not in texts_of(reqs[3])


async def test_event_handler_may_answer_at_once(tmp_path):
    ch = make(tmp_path, ask_fn=False)

    def ui(kind, payload):
        if kind == "ask":
            assert ch.pending == payload["question"]
            ch.answer("answered from the ask event")

    ch.on_event = ui
    assert await ch.ask("q?") == "answered from the ask event"
