"""The gateway's pure parts: prices, the meter, budgets, recordings, replay's bookkeeping, the
repro diff, and the promise that the host side never imports flower."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flower.runtime.resilience import classify_result
from flower.scripted import ParsedRequest
from flower_batch.errors import GatewayModeError
from flower_batch.gateway.budget import Budgets, batch_spent, job_budget
from flower_batch.gateway.host_modes import GATEWAY_KEY_ENV, mode_setup
from flower_batch.gateway.metering import JobMeter, fold, read_lines, read_meter
from flower_batch.gateway.prices import cost_usd, price_for
from flower_batch.gateway.recording import request_summary, stage_recording
from flower_batch.gateway.replay import JobReplay, compare_shapes, plan_from
from flower_batch.gateway.tap import refusal_plan
from flower_batch.gateway.usage import gateway_outcome
from flower_batch.matrix import JobRecord, JobSpec
from flower_batch.repro import ReproDiff, changes, drift_between

# -- prices -------------------------------------------------------------------------------------


def test_models_are_priced_by_id_dated_id_and_suffix() -> None:
    sonnet = price_for("claude-sonnet-4-5")
    assert sonnet is not None and (sonnet.input, sonnet.output, sonnet.cache_read) == (3, 15, 0.3)
    assert price_for("claude-sonnet-4-5-20250929") is sonnet
    assert price_for("claude-opus-4-6[1m]") == price_for("claude-opus-4-6")
    assert price_for("claude-opus-4-1").input == 15  # not opus-4's neighbour by prefix accident
    assert price_for("claude-opus-5-5").input == 4
    assert price_for("scripted-model") is None and price_for("claude-opus-4-5x") is None


def test_cost_of_a_response() -> None:
    usage = {
        "input_tokens": 2400,
        "output_tokens": 150,
        "cache_read_input_tokens": 1800,
        "cache_creation_input_tokens": 1000,
        "cache_creation": {"ephemeral_5m_input_tokens": 600, "ephemeral_1h_input_tokens": 400},
    }
    # opus-5-5: 4 in, 20 out, 0.2 cache read, 5 per 5-minute write, 8 per 1-hour write ($/Mtok)
    expected = (2400 * 4 + 150 * 20 + 1800 * 0.2 + 600 * 5 + 400 * 8) / 1e6
    assert cost_usd("claude-opus-5-5", usage) == pytest.approx(expected)
    assert cost_usd("no-such-model", usage) is None
    # haiku 5.5 is dearer above 100k prompt tokens
    assert cost_usd("claude-haiku-5-5", {"input_tokens": 200_000}) == pytest.approx(200_000 * 0.5 / 1e6)


# -- the meter ----------------------------------------------------------------------------------


def test_meter_is_durable_per_update_and_counts_the_last_usage_of_each_exchange(tmp_path: Path) -> None:
    meter = JobMeter(tmp_path, "j", "anthropic")
    ex = meter.new_exchange()
    meter.update(ex, "claude-sonnet-4-5", {"input_tokens": 1000, "output_tokens": 1}, final=False)
    # killed here: the input is already on disk
    assert read_meter(tmp_path).tokens["input_tokens"] == 1000
    assert read_meter(tmp_path).incomplete == 1
    meter.update(ex, "claude-sonnet-4-5", {"output_tokens": 200}, final=True)
    ex2 = meter.new_exchange()
    meter.update(ex2, "claude-sonnet-4-5", {"input_tokens": 10, "output_tokens": 5}, final=True)
    got = read_meter(tmp_path)
    assert got.tokens == {
        "input_tokens": 1010,
        "output_tokens": 205,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    assert got.exchanges == 2 and got.incomplete == 0
    assert got.cost_usd == pytest.approx((1010 * 3 + 205 * 15) / 1e6)
    summary = json.loads((tmp_path / "meter.json").read_text())
    assert summary["cost_usd"] == pytest.approx(got.cost_usd)


def test_a_streamed_update_is_written_at_once_and_synced_after_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tap's updates (summary=False) are in meter.jsonl before the event goes on, so a gateway
    killed right after still has them; their fsync waits for write_summary (after the answer)."""
    import os

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    meter = JobMeter(tmp_path, "j", "anthropic")
    ex = meter.new_exchange()
    meter.update(ex, "claude-sonnet-4-5", {"input_tokens": 1000, "output_tokens": 1}, final=False, summary=False)
    meter.update(ex, "claude-sonnet-4-5", {"output_tokens": 200}, final=True, summary=False)
    assert synced == []  # nothing synced on the job's wait
    got = read_meter(tmp_path)  # yet both lines are there for whoever reads next (a restarted gateway)
    assert got is not None and got.tokens["output_tokens"] == 200 and got.incomplete == 0
    assert not (tmp_path / "meter.json").exists()
    meter.write_summary()
    assert len(synced) == 1  # the two lines, in one sync, then meter.json
    assert json.loads((tmp_path / "meter.json").read_text())["exchanges"] == 1
    meter.write_summary()
    assert len(synced) == 1  # nothing new: no sync


def test_unknown_model_keeps_tokens_and_makes_cost_unknown(tmp_path: Path) -> None:
    meter = JobMeter(tmp_path, "j", "anthropic")
    meter.update(meter.new_exchange(), "mystery-1", {"input_tokens": 7, "output_tokens": 3}, final=True)
    got = read_meter(tmp_path)
    assert got.tokens["input_tokens"] == 7 and got.cost_usd is None and got.unpriced_models == ["mystery-1"]
    assert "unknown" in got.describe()
    # the requested model is priced when the answering one is unknown (the CLI does the same)
    meter.update(
        meter.new_exchange(), "mystery-1", {"input_tokens": 1000}, final=True, requested="claude-sonnet-4-5"
    )
    assert read_meter(tmp_path).cost_known_usd == pytest.approx(1000 * 3 / 1e6)


def test_a_torn_last_line_is_skipped_and_a_new_gateway_continues_the_count(tmp_path: Path) -> None:
    meter = JobMeter(tmp_path, "j", "anthropic")
    meter.update(meter.new_exchange(), "claude-haiku-4-5", {"input_tokens": 100}, final=True)
    with (tmp_path / "meter.jsonl").open("a") as out:
        out.write('{"kind": "usage", "ex": "torn')  # the gateway died mid-write
    assert read_meter(tmp_path).tokens["input_tokens"] == 100
    again = JobMeter(tmp_path, "j", "anthropic")  # e.g. a wake: another gateway, same job folder
    again.update(again.new_exchange(), "claude-haiku-4-5", {"input_tokens": 50}, final=True)
    assert read_meter(tmp_path).tokens["input_tokens"] == 150


def test_replay_meters_tokens_but_bills_nothing(tmp_path: Path) -> None:
    meter = JobMeter(tmp_path, "j", "replay", free=True)
    meter.update(meter.new_exchange(), "claude-sonnet-4-5", {"input_tokens": 1000}, final=True)
    got = read_meter(tmp_path)
    assert got.tokens["input_tokens"] == 1000 and got.cost_usd == 0 and got.free
    assert got.spent_usd == 0


# -- budgets ------------------------------------------------------------------------------------


def _record(batch_dir: Path, job: str, budget: float | None) -> None:
    (batch_dir / job).mkdir(parents=True, exist_ok=True)
    (batch_dir / job / "record.json").write_text(json.dumps({"spec": {"budget_usd": budget}}))


def test_job_and_batch_budgets(tmp_path: Path) -> None:
    _record(tmp_path, "a", 0.001)
    _record(tmp_path, "b", None)
    assert job_budget(tmp_path, "a") == 0.001 and job_budget(tmp_path, "b") is None
    meter_a = JobMeter(tmp_path / "a" / "logs", "a", "anthropic")
    budgets = Budgets(tmp_path, batch_budget_usd=0.002, rescan_s=0)
    assert budgets.refusal("a", {"a": meter_a.summary()}) is None
    meter_a.update(meter_a.new_exchange(), "claude-sonnet-4-5", {"input_tokens": 400}, final=True)  # $0.0012
    reason = budgets.refusal("a", {"a": meter_a.summary()})
    assert reason and "budget exhausted for job a" in reason
    assert budgets.refusal("b", {"a": meter_a.summary()}) is None  # b has no budget; batch not spent yet
    # another gateway's job spends the rest of the batch: seen through the batch folder
    meter_b = JobMeter(tmp_path / "b" / "logs", "b", "anthropic")
    meter_b.update(meter_b.new_exchange(), "claude-sonnet-4-5", {"input_tokens": 300}, final=True)
    assert batch_spent(tmp_path) == pytest.approx(0.0021)
    reason = budgets.refusal("b", {"a": meter_a.summary()})
    assert reason and "batch budget exhausted" in reason


def test_the_refusal_is_an_anthropic_error_the_cli_and_flower_treat_as_fatal() -> None:
    plan = refusal_plan(
        "flower-batch gateway: budget exhausted for job x: spent $0.0100 of its $0.0100 budget"
    )
    assert plan.status == 402 and plan.headers["x-should-retry"] == "false"
    assert plan.json_body["type"] == "error" and plan.json_body["error"]["type"] == "billing_error"
    shown = "API Error: 402 " + plan.json_body["error"]["message"]  # what the CLI reports (2.1.327)
    assert classify_result(shown, 402, "api_error") == "fatal"


# -- host side of the modes ----------------------------------------------------------------------


def test_anthropic_mode_needs_the_host_key_and_passes_it_by_env_only() -> None:
    with pytest.raises(GatewayModeError, match="ANTHROPIC_API_KEY"):
        mode_setup("anthropic", scenario_path=None, batch_budget_usd=None, environ={})
    setup = mode_setup(
        "anthropic",
        scenario_path=None,
        batch_budget_usd=1.5,
        environ={"ANTHROPIC_API_KEY": "sk-secret", "FLOWER_BATCH_UPSTREAM": "http://up:1"},
    )
    assert setup.env == {GATEWAY_KEY_ENV: "sk-secret"} and setup.egress
    assert "sk-secret" not in " ".join(setup.args) and "sk-secret" not in repr(setup)
    assert setup.args == ["--upstream", "http://up:1", "--batch-budget-usd", "1.5"]
    assert mode_setup("replay", scenario_path=None, batch_budget_usd=None, environ={}).args == []


def test_host_side_gateway_modules_do_not_load_the_sdk() -> None:
    # importing claude_agent_sdk (and mcp) costs ~1 s on every flower-batch command
    code = (
        "import sys, flower_batch.gateway.sidecar, flower_batch.gateway.usage, flower_batch.gateway.budget,"
        " flower_batch.gateway.metering, flower_batch.cli;"
        "print('claude_agent_sdk' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


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


# -- repro's comparison ---------------------------------------------------------------------------


def _step(name: str, ok: bool = True, calls: tuple = ()) -> dict:
    return {"step": name, "ok": ok, "verdict": None, "tool_calls": list(calls), "error": None}


def test_repro_diff_names_the_first_difference() -> None:
    same = ReproDiff([_step("do")], [_step("do")], {"a.txt": "added"}, {"a.txt": "added"}, [])
    assert same.identical and same.first_difference() is None
    calls = ReproDiff([_step("do", calls=({"name": "Read", "input": {"f": 1}},))], [_step("do")], {}, {}, [])
    assert not calls.identical and calls.first_difference() == "step attempt 1 (do): tool_calls differs"
    missing = ReproDiff([_step("do"), _step("verify")], [_step("do")], {}, {}, [])
    assert missing.first_difference() == "step attempt 2 (verify) exists only in the original"
    files = ReproDiff([_step("do")], [_step("do")], {"a": "added"}, {"a": "added"}, ["a"])
    assert not files.identical and "a" in files.first_difference()


def test_workspace_changes() -> None:
    assert changes({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}) == {"b": "modified", "c": "added"}
    assert changes({"a": "1"}, {}) == {"a": "deleted"}


def test_drift_is_image_sdk_cli_and_workspace(tmp_path: Path) -> None:
    spec = JobSpec(id="j", task="t", variant="v", repeat=1, matrix={}, prompt="p")
    record = JobRecord(
        job_id="j", batch="b", inputs_hash="h", image_id="sha256:aaa", status="passed",
        spec=spec.to_dict(), versions={"sdk": "0.2.184", "cli": "2.1.327"},
    )  # fmt: skip
    assert drift_between(record, "sha256:aaa", {"sdk": "0.2.184", "cli": "2.1.327"}, spec) == []
    drift = drift_between(record, "sha256:bbb", {"sdk": "0.2.185", "cli": "2.1.327"}, spec)
    assert drift == ["image sha256:aaa -> sha256:bbb", "claude-agent-sdk 0.2.184 -> 0.2.185"]
