"""Recordings and replay, the gateway's pure parts: request summaries, replay per session, the
first divergence, staging a recording, and folding its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flower.runtime.resilience import classify_result
from flower.scripted import ParsedRequest
from flower_batch.gateway.host.usage import gateway_outcome
from flower_batch.gateway.metering import JobMeter, fold, read_lines
from flower_batch.gateway.recording import request_summary, stage_recording
from flower_batch.gateway.server.replay import JobReplay, compare_shapes, plan_from

# -- recordings and replay ------------------------------------------------------------------------


def _request(messages: list, *, session: str = "s1", system: str = "ROLE: w", nth: int = 1) -> ParsedRequest:
    body = {"model": "claude-sonnet-4-5", "stream": True, "system": system, "messages": messages}
    req = ParsedRequest(
        method="POST",
        path="/j/x/v1/messages",
        prefix="/j/x",
        endpoint="messages",
        headers={"x-claude-code-session-id": session},
        body=body,
        nth=nth,
    )
    return req


FIRST = [
    {"role": "user", "content": [{"type": "text", "text": "<system-reminder>r</system-reminder>Do it."}]}
]
SECOND = FIRST + [
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]},
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "at 12:00:01"}],
    },
]


def test_request_summary_hashes_prompts_not_tool_output() -> None:
    first, second = request_summary(_request(FIRST)), request_summary(_request(SECOND, nth=2))
    assert first["prompt_head"] == "Do it." and first["prompt_sha"] and first["tool_result_ids"] == []
    assert second["prompt_sha"] is None and second["tool_result_ids"] == ["toolu_1"]
    assert second["n_messages"] == 3


def _entry(seq: int, req: ParsedRequest, text: str, outcome: str = "stream") -> dict:
    events = [["message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 1}}}]]
    events.append(["content_block_delta", {"type": "content_block_delta", "delta": {"text": text}}])
    return {
        "format": "flower-batch/recording@1",
        "seq": seq,
        "endpoint": "messages",
        "request": request_summary(req),
        "response": {"status": 200, "headers": {}, "events": events, "json": None},
        "outcome": outcome,
    }


def test_replay_serves_in_order_per_session_and_pairs_new_session_ids(tmp_path: Path) -> None:
    recording = [_entry(1, _request(FIRST), "one"), _entry(2, _request(SECOND, nth=2), "two")]
    replay = JobReplay("x", recording, tmp_path)
    a = replay.respond(_request(FIRST, session="new"))
    b = replay.respond(_request(SECOND, session="new", nth=2))
    assert [e[1]["delta"]["text"] for e in (list(a.events)[1], list(b.events)[1])] == ["one", "two"]
    state = json.loads((tmp_path / "replay.json").read_text())
    assert state["served"] == 2 and state["recorded"] == 2 and state["divergence"] is None


def test_replay_reports_the_first_divergence_precisely(tmp_path: Path) -> None:
    recording = [_entry(1, _request(FIRST), "one"), _entry(2, _request(SECOND, nth=2), "two")]
    replay = JobReplay("x", recording, tmp_path)
    replay.respond(_request(FIRST, session="new"))
    changed = SECOND[:2] + [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}]}
    ]
    plan = replay.respond(_request(changed, session="new", nth=2))
    assert plan.status == 409 and plan.headers["x-should-retry"] == "false"
    div = json.loads((tmp_path / "replay.json").read_text())["divergence"]
    assert (div["session_index"], div["request_index"], div["exchange"]) == (1, 2, 2)
    assert div["field"] == "tool results (tool_use ids)"
    assert div["recorded"] == ["toolu_1"] and div["got"] == ["toolu_9"]
    assert "session 1, request 2" in div["message"]
    message = plan.json_body["error"]["message"]
    assert classify_result("API Error: 409 " + message, 409, "api_error") == "fatal"
    # later requests get the same refusal, the first divergence stays the one reported
    assert replay.respond(_request(FIRST, session="other")).status == 409
    assert json.loads((tmp_path / "replay.json").read_text())["divergence"] == div


def test_a_changed_prompt_or_instructions_diverge() -> None:
    recorded = request_summary(_request(FIRST))
    other_prompt = [{"role": "user", "content": "Do something else."}]
    assert compare_shapes(recorded, request_summary(_request(other_prompt)))[0] == "prompt"
    assert compare_shapes(recorded, request_summary(_request(FIRST, system="ROLE: other")))[0].startswith(
        "system prompt"
    )
    assert compare_shapes(recorded, request_summary(_request(FIRST, session="zz"))) is None


def test_a_cut_stream_is_replayed_cut() -> None:
    plan = plan_from(_entry(1, _request(FIRST), "one", outcome="cut"))
    assert plan.cut_after == 2 and plan.outcome == "cut"


def test_an_early_end_of_the_run_counts_as_divergence(tmp_path: Path) -> None:
    recording = [_entry(1, _request(FIRST), "one"), _entry(2, _request(SECOND, nth=2), "two")]
    JobReplay("x", recording, tmp_path).respond(_request(FIRST, session="new"))
    found = gateway_outcome(tmp_path, "replay")
    assert found.divergence and "ended after 1 of the 2" in found.divergence


def test_stage_recording_takes_a_job_folder_or_a_file(tmp_path: Path) -> None:
    job = tmp_path / "orig"
    (job / "logs").mkdir(parents=True)
    (job / "logs" / "recording.jsonl").write_text('{"format": "flower-batch/recording@1", "seq": 1}\n')
    dest = stage_recording(job, tmp_path / "new")
    assert read_lines(dest) == [{"format": "flower-batch/recording@1", "seq": 1}]
    with pytest.raises(FileNotFoundError):
        stage_recording(tmp_path / "nowhere", tmp_path / "new2")


def test_fold_counts_refusals(tmp_path: Path) -> None:
    meter = JobMeter(tmp_path, "j", "anthropic")
    meter.refused("flower-batch gateway: budget exhausted for job j")
    got = fold(read_lines(tmp_path / "meter.jsonl"))
    assert got.refused == 1 and "budget" in (got.refused_reason or "")
    outcome = gateway_outcome(tmp_path, "anthropic")
    assert outcome.over_budget and "budget" in (outcome.budget_reason or "")


# The CLI asks for a session's title beside the agent's first turn, in the same session: the two
# race, and the recording keeps them in the order their answers ended.
TITLE = [{"role": "user", "content": "<session>\nDo it.\n</session>\n\nWrite the title in a few words."}]
TITLE_SYSTEM = "You write a conversation's title."


def _texts(*plans) -> list[str]:
    return [list(plan.events)[1][1]["delta"]["text"] for plan in plans]


def test_the_title_and_the_first_turn_are_served_in_either_order(tmp_path: Path) -> None:
    recording = [
        _entry(1, _request(TITLE, system=TITLE_SYSTEM), "title"),
        _entry(2, _request(FIRST, nth=2), "one"),
        _entry(3, _request(SECOND, nth=3), "two"),
    ]
    for order in ((1, 0, 2), (0, 1, 2), (1, 2, 0)):
        asked = [_request(TITLE, session="new", system=TITLE_SYSTEM), _request(FIRST, session="new"),
                 _request(SECOND, session="new")]  # fmt: skip
        logs = tmp_path / "-".join(map(str, order))
        replay = JobReplay("x", recording, logs)
        got = dict(zip(order, _texts(*(replay.respond(asked[i]) for i in order)), strict=True))
        assert [got[i] for i in range(3)] == ["title", "one", "two"], order
        state = json.loads((logs / "replay.json").read_text())
        assert state["served"] == 3 and state["divergence"] is None, state


def test_a_retried_request_gets_the_recorded_error_then_the_answer(tmp_path: Path) -> None:
    overloaded = _entry(1, _request(FIRST), "")
    overloaded["response"] = {"status": 529, "headers": {}, "events": None, "json": {"type": "error"}}
    recording = [
        overloaded,
        _entry(2, _request(FIRST, nth=2), "one"),
        _entry(3, _request(SECOND, nth=3), "two"),
    ]
    replay = JobReplay("x", recording, tmp_path)
    assert replay.respond(_request(FIRST, session="new")).status == 529
    assert _texts(
        replay.respond(_request(FIRST, session="new")), replay.respond(_request(SECOND, session="new"))
    ) == [
        "one",
        "two",
    ]


def test_a_divergence_beside_the_title_is_said_against_the_agents_turn(tmp_path: Path) -> None:
    recording = [
        _entry(1, _request(TITLE, system=TITLE_SYSTEM), "title"),
        _entry(2, _request(FIRST, nth=2), "one"),
        _entry(3, _request(SECOND, nth=3), "two"),
    ]
    replay = JobReplay("x", recording, tmp_path)
    replay.respond(_request(FIRST, session="new"))  # the title not asked yet
    changed = SECOND[:2] + [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}]}
    ]
    assert replay.respond(_request(changed, session="new")).status == 409
    div = json.loads((tmp_path / "replay.json").read_text())["divergence"]
    assert (div["request_index"], div["exchange"], div["field"]) == (3, 3, "tool results (tool_use ids)")
    assert div["recorded"] == ["toolu_1"] and div["got"] == ["toolu_9"]
    # every later request is refused, the title's too
    assert replay.respond(_request(TITLE, session="new", system=TITLE_SYSTEM)).status == 409
