"""The gateway's prices, meter and budgets (pure parts: no Docker, no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flower.runtime.resilience import classify_result
from flower_batch.gateway.budget import Budgets, batch_spent, job_budget
from flower_batch.gateway.metering import JobMeter, read_meter
from flower_batch.gateway.prices import cost_usd, price_for
from flower_batch.gateway.server.tap import refusal_plan
from flower_batch.jobmodel.budget import Budget
from flower_batch.jobmodel.record import new_record, write_record
from flower_batch.jobmodel.spec import JobSpec

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
    meter.update(
        ex, "claude-sonnet-4-5", {"input_tokens": 1000, "output_tokens": 1}, final=False, summary=False
    )
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
    spec = JobSpec(id=job, task="t", variant="v", repeat=1, matrix={}, prompt="p", budget_usd=budget)
    (batch_dir / job).mkdir(parents=True, exist_ok=True)
    write_record(batch_dir / job / "record.json", new_record(spec, batch="b", image_id="sha256:x"))


def test_job_and_batch_budgets(tmp_path: Path) -> None:
    _record(tmp_path, "a", 0.001)
    _record(tmp_path, "b", None)
    assert job_budget(tmp_path, "a") == Budget(0.001) and job_budget(tmp_path, "b") == Budget(None)
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


def test_a_pause_and_wakes_with_gateway_deaths_meter_every_answer_once(tmp_path: Path) -> None:
    """A job's meter over a pause and wakes (issue 20 item 5): each wake's gateway (a new process,
    or one restarted after a kill mid-answer) goes on with meter.jsonl under fresh exchange ids;
    the total is every answer the model sent, once; a refusal belongs to the attempt it came in,
    and a raised cap lets the job spend again."""
    from flower_batch.gateway.host.usage import gateway_outcome, meter_mark

    logs = tmp_path / "j" / "logs"
    answer = {"input_tokens": 1000, "output_tokens": 100}  # $0.0045 at claude-sonnet-4-5 prices
    one = cost_usd("claude-sonnet-4-5", answer)
    _record(tmp_path, "j", 0.01)
    budgets = Budgets(tmp_path, batch_budget_usd=None)

    def send(meter: JobMeter, n: int) -> None:
        for _ in range(n):
            assert budgets.refusal("j", {"j": meter.summary()}) is None
            meter.update(meter.new_exchange(), "claude-sonnet-4-5", answer, final=True)

    first = JobMeter(logs, "j", "scripted")
    send(first, 3)  # 3 x $0.0045 crosses $0.01 with the third: the fourth is refused
    reason = budgets.refusal("j", {"j": first.summary()})
    assert reason is not None
    first.refused(reason)
    paused = gateway_outcome(logs, "scripted")
    assert paused.over_budget and paused.spent_usd == pytest.approx(3 * one)

    mark = meter_mark(logs)  # the wake begins: +$0.02 on the cap
    assert (mark.refused, mark.spent_usd) == (1, pytest.approx(3 * one))
    _record(tmp_path, "j", 0.03)
    woken = JobMeter(logs, "j", "scripted")  # the wake's gateway
    send(woken, 2)
    cut = woken.new_exchange()  # killed mid-answer: its first event's usage is all it sent
    woken.update(cut, "claude-sonnet-4-5", {"input_tokens": 1000, "output_tokens": 1}, final=False)
    restarted = JobMeter(logs, "j", "scripted")  # the supervisor's restart of that gateway
    send(restarted, 1)
    woke = gateway_outcome(logs, "scripted", mark)
    assert not woke.over_budget  # the pause's refusal is the first attempt's, not this one's
    sent = 6 * one + cost_usd("claude-sonnet-4-5", {"input_tokens": 1000, "output_tokens": 1})
    assert woke.cost_usd == pytest.approx(sent, abs=1e-6)
    summary = read_meter(logs)
    assert summary is not None and summary.exchanges == 7 and summary.incomplete == 1
    assert summary.refused == 1 and summary.tokens["input_tokens"] == 7000
