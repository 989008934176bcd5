"""Step/Workflow rules (ctx, reduce, gates, retries, StepAbort, resume_from, the two retry layers) on the real CLI + scripted model."""

from __future__ import annotations

import json

import pytest

from flower import AgentSpec, Step, StepAbort, Workflow, WorkflowError
from tests.rig import message_requests, runtime, scripted, texts_of

pytestmark = pytest.mark.anyio

SPEC = AgentSpec("worker", instructions="ROLE=worker", allowed_tools=["Read"])

SCENARIO = {
    "rules": [
        {
            "name": "read",
            "when": {"last_user_contains": "read the note", "last_is_tool_result": False},
            "reply": [
                {"text": "Reading it."},
                {"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/note.txt"}}},
            ],
        },
        {
            "name": "after-read",
            "when": {"last_is_tool_result": True, "tool_result_contains": "banana"},
            "reply": [{"text": "The note says banana."}],
        },
        {
            "name": "remember",
            "when": {"last_user_contains": "remember 42"},
            "reply": [{"text": "ok, 42 noted"}],
        },
        {"name": "recall", "when": {"last_user_contains": "which number"}, "reply": [{"text": "it was 42"}]},
        {"name": "boom", "when": {"last_user_contains": "please fail"}, "error": 500},
        {"name": "fix", "when": {"last_user_contains": "fix it"}, "reply": [{"text": "fixed version"}]},
        {"name": "default", "reply": [{"text": "done: {n}"}]},
    ]
}


async def test_read_tool_really_runs_and_text_is_the_final_answer(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        (rt.workspace / "note.txt").write_text("the fruit is banana\n")
        ctx = await Workflow([Step("look", SPEC, "read the note")], continuous=False).run(rt)
        res = ctx["_results"]["look"]
        assert res.ok, res.error
        assert res.text == "The note says banana."
        assert ctx["look"] == "The note says banana."
        assert [c["name"] for c in res.tool_calls] == ["Read"]
        last = message_requests(srv)[-1]
        assert "the fruit is banana" in texts_of(last)  # the tool really ran; its result went back
        rows = json.loads(rt.manifest_path.read_text())
        assert [r["step"] for r in rows] == ["look"] and rows[0]["run"] == rt.run_id
        assert rows[0]["duration_s"] >= 0 and rows[0]["session_id"] == res.session_id


async def test_resume_from_continues_and_fork_branches(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        wf = Workflow(
            [
                Step("a", SPEC, "remember 42"),
                Step("b", SPEC, "which number was it?", resume_from="a"),
                Step("c", SPEC, "which number, branch?", resume_from="a", fork=True),
            ],
            continuous=False,
        )
        ctx = await wf.run(rt)
        a, b, c = (ctx["_results"][n] for n in "abc")
        assert a.ok and b.ok and c.ok
        assert b.session_id == a.session_id
        assert c.session_id and c.session_id != a.session_id
        reqs = message_requests(srv)
        assert "remember 42" in texts_of(reqs[1]) and "ok, 42 noted" in texts_of(reqs[1])
        assert "remember 42" in texts_of(reqs[2])
        assert ctx["_sessions"] == {"a": a.session_id, "b": a.session_id, "c": c.session_id}


async def test_on_reject_round_resumes_and_retry_starts_fresh(tmp_path):
    calls = {"gate_round": 0, "gate_retry": 0}

    async def gate_round(result, ctx):
        calls["gate_round"] += 1
        return result.text == "fixed version"

    def gate_retry(result, ctx):
        calls["gate_retry"] += 1
        return calls["gate_retry"] >= 2

    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        wf = Workflow(
            [
                Step("r", SPEC, "first try", retries=2, gate=gate_round, on_reject=lambda res, ctx: "fix it"),
                Step("t", SPEC, "another", retries=2, gate=gate_retry),
            ],
            continuous=False,
        )
        ctx = await wf.run(rt)
    names = [r.step for r in rt.results]
    assert names == ["r", "r#round2", "t", "t#retry1"]
    r1, r2, t1, t2 = rt.results
    assert r2.session_id == r1.session_id  # the round continued the rejected session
    assert t2.session_id != t1.session_id  # the retry started from scratch
    assert calls == {"gate_round": 2, "gate_retry": 2}
    assert ctx["r"] == "fixed version"
    rows = json.loads(rt.manifest_path.read_text())
    assert [r["step"] for r in rows] == names


async def test_ctx_table_stop_skip_continue_when(tmp_path):
    gate_calls: list[str] = []

    def gate(result, ctx):
        gate_calls.append(result.step)
        return True

    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        wf = Workflow(
            [
                Step("skipper", SPEC, "please fail", on_fail="skip", gate=gate),
                Step("goer", SPEC, "please fail again", on_fail="continue"),
                Step("fine", SPEC, "hello", reduce=lambda res, ctx: {"upper": res.text.upper()}),
                Step("never_when", SPEC, "hello", when=lambda ctx: False),
                Step("async_when", SPEC, "hello", when=_async_true),
                Step("stopper", SPEC, "please fail at last", on_fail="stop"),
                Step("after", SPEC, "hello"),
            ],
            continuous=False,
        )
        ctx = await wf.run(rt)
    assert "skipper" not in ctx and not ctx["_results"]["skipper"].ok
    assert (
        gate_calls == []
    )  # the gate is never called for a failed result: a failed result is retried or fails as it is
    assert ctx["goer"] == ""  # continue: the (incomplete) text is written, reduce not applied
    assert ctx["fine"]["upper"].startswith("DONE")
    assert "never_when" not in ctx and "never_when" not in ctx["_results"]
    assert ctx["async_when"].startswith("done")
    assert "stopper" not in ctx and ctx["_failed_at"] == "stopper"
    assert "after" not in ctx["_results"]
    assert "500" in (ctx["_results"]["stopper"].error or "")
    for key in ("_runtime", "_sessions", "_results", "_lineage", "_woke"):
        assert key in ctx


async def _async_true(ctx):
    return True


async def test_step_abort_breaks_the_retry_loop(tmp_path):
    def gate(result, ctx):
        raise StepAbort("the goal is unreachable")

    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        ctx = await Workflow([Step("x", SPEC, "hello", retries=3, gate=gate)], continuous=False).run(rt)
    assert [r.step for r in rt.results] == ["x"]
    assert ctx["_aborted"] == "the goal is unreachable"
    assert ctx["_failed_at"] == "x" and "x" not in ctx


async def test_resume_from_a_step_without_session_raises(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        wf = Workflow(
            [Step("a", SPEC, "hello", when=lambda ctx: False), Step("b", SPEC, "hi", resume_from="a")],
            continuous=False,
        )
        with pytest.raises(ValueError, match="'b'.*resume_from='a'.*no session"):
            await wf.run(rt)


async def test_second_run_of_same_workflow_keeps_old_keys(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        wf = Workflow([Step("one", SPEC, "hello")], continuous=False, context={"seed": 1})
        first = await wf.run(rt)
        wf.steps = [Step("two", SPEC, "hello")]
        second = await wf.run(rt)
    assert first is second is wf.context
    assert {"seed", "one", "two"} <= set(second)


# -- bad input: each a clear error naming the step (pure logic, no model needed) -------------


def test_reserved_name_is_refused():
    with pytest.raises(WorkflowError, match="'_x'.*reserved"):
        Step("_x", SPEC, "p")


def test_duplicate_names_are_refused():
    with pytest.raises(WorkflowError, match="'a'.*used twice"):
        Workflow([Step("a", SPEC, "p"), Step("a", SPEC, "q")])


def test_unknown_on_fail_is_refused():
    with pytest.raises(WorkflowError, match="'a'.*on_fail='explode'"):
        Step("a", SPEC, "p", on_fail="explode")


def test_async_reduce_is_refused():
    async def reduce(result, ctx):
        return 1

    with pytest.raises(WorkflowError, match="'a'.*reduce must be"):
        Step("a", SPEC, "p", reduce=reduce)


def test_prompt_callable_that_raises_names_the_step():
    step = Step("a", SPEC, lambda ctx: ctx["missing"])
    with pytest.raises(WorkflowError, match="step 'a': its prompt function raised KeyError"):
        step.render({})


def test_resume_from_unknown_step_is_refused():
    with pytest.raises(WorkflowError, match="'b'.*names no earlier step"):
        Workflow([Step("b", SPEC, "p", resume_from="zzz")])


async def test_a_failing_event_hook_never_fails_the_step_or_loses_its_row(tmp_path):
    def hook(kind, payload):
        raise RuntimeError("display broke")

    with scripted(tmp_path, SCENARIO) as srv:
        rt = runtime(tmp_path, srv, resilience=True)
        res = await rt.run(SPEC, "remember 42", on_event=hook)
    assert res.ok and res.attempts == 1, res.errors
    assert len(message_requests(srv)) == 1  # not retried as if it were an outage
    rows = json.loads(rt.manifest_path.read_text())
    assert [r["step"] for r in rows] == ["worker"] and rows[0]["ok"]


def test_long_tool_inputs_are_kept_as_head_and_digest():
    from flower.runtime.engine import compact_input

    big = "x" * 5000
    short = compact_input({"file_path": "/w/a.txt", "content": big, "list": [big]})
    assert short["file_path"] == "/w/a.txt"
    assert short["content"].startswith("x" * 200) and "5000 chars, sha256:" in short["content"]
    assert len(short["content"]) < 300 and short["list"][0] == short["content"]
    assert compact_input({"content": big + "y"})["content"] != short["content"]  # still tells runs apart


def test_background_subagents_are_waited_for_until_a_terminal_report():
    from claude_agent_sdk import (
        TaskNotificationMessage,
        TaskStartedMessage,
        TaskUpdatedMessage,
        ToolResultBlock,
        UserMessage,
    )

    from flower.runtime.background import Background

    launched = UserMessage(
        [ToolResultBlock("toolu_1", [{"type": "text", "text": "Async agent launched successfully."}])]
    )
    started = TaskStartedMessage("task_started", {}, "t1", "coder", "u1", "s", tool_use_id="toolu_1")
    # The CLI may report the launch before TaskStarted: pending from the tool result alone.
    bg = Background()
    bg.note(launched)
    assert bg.pending
    bg.note(started)
    bg.note(TaskUpdatedMessage("task_updated", {}, "t1", {"status": "running"}))
    assert bg.pending  # not terminal yet
    bg.note(TaskUpdatedMessage("task_updated", {}, "t1", {"status": "completed"}))
    assert not bg.pending  # a terminal TaskUpdated alone ends it
    # ...or a TaskNotification; a late copy of the launch result does not revive it.
    bg = Background()
    bg.note(started)
    bg.note(TaskNotificationMessage("task_notification", {}, "t1", "completed", "/o", "done", "u2", "s"))
    bg.note(launched)
    assert not bg.pending
