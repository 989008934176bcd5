"""The soak job's independent account of what the scripted model sent (bench/soakjob.py), which
the supervised-gateway tests and bench/soak_e2e.py hold the meter to."""

from __future__ import annotations

from pathlib import Path

from bench import soakjob
from flower.scripted import Scenario
from flower_batch.gateway.prices import cost_usd

MODEL = "claude-sonnet-4-5"


def _log(*rows: tuple[str, int]) -> list[dict]:
    return [
        {
            "endpoint": "messages",
            "status": 200,
            "outcome": "stream",
            "session": "s",
            "model": MODEL,
            "rule": rule,
            "n_messages": n,
        }
        for rule, n in rows
    ]


def _meter(tokens: dict[str, int], cost: float, exchanges: int, incomplete: int = 0) -> dict:
    return {"tokens": tokens, "cost_usd": cost, "exchanges": exchanges, "incomplete": incomplete}


def test_the_scenario_loads_with_the_gateways_own_parser(tmp_path: Path) -> None:
    files = soakjob.write_project(tmp_path, leg=5, handoff_at=7, window=60_000)
    assert len(Scenario.load(files["scenario"]).rules) == 5
    assert soakjob.rule_usages(files["scenario"])["context full"]["input_tokens"] == 12_000  # past 60K's 10K


def test_a_cut_answer_counts_at_its_first_event_or_not_at_all(tmp_path: Path) -> None:
    files = soakjob.write_project(tmp_path, leg=5, handoff_at=None)
    # the third answer (4 messages) was cut: the client sent the same 4 messages again
    exp = soakjob.expected_usage(
        files["scenario"], _log(("start", 2), ("count", 4), ("count", 4), ("leg done", 6))
    )
    assert exp.complete == 3 and exp.cut == 1
    count = soakjob.rule_usages(files["scenario"])["count"]
    start = {**count, "output_tokens": 1}
    assert exp.cut_starts[0][0] == start
    # the gateway died before the answer's first event: nothing of it metered
    assert exp.accepts(_meter(exp.tokens, exp.cost_usd, 3))
    # it died mid-stream: the first event's usage metered, marked incomplete
    with_start = {k: exp.tokens[k] + start[k] for k in exp.tokens}
    assert exp.accepts(_meter(with_start, exp.cost_usd + (cost_usd(MODEL, start) or 0), 4, incomplete=1))
    # an answer counted twice, or a full answer for the cut one, is refused
    twice = {k: exp.tokens[k] + count[k] for k in exp.tokens}
    assert not exp.accepts(_meter(twice, exp.cost_usd + (cost_usd(MODEL, count) or 0), 4))
    assert not exp.accepts(_meter(exp.tokens, exp.cost_usd, 4))
    assert not exp.accepts(_meter(with_start, exp.cost_usd, 4, incomplete=1))  # cost must agree too


def test_with_a_client_timeout_the_answer_asked_again_may_count_whole_but_once(tmp_path: Path) -> None:
    files = soakjob.write_project(tmp_path, leg=5, handoff_at=None)
    exp = soakjob.expected_usage(
        files["scenario"], _log(("start", 2), ("count", 4), ("count", 4), ("leg done", 6))
    )
    count = soakjob.rule_usages(files["scenario"])["count"]
    assert exp.cut_fulls[0][0] == {k: v for k, v in count.items() if k in exp.tokens}
    whole = {k: exp.tokens[k] + count[k] for k in exp.tokens}
    whole_cost = exp.cost_usd + (cost_usd(MODEL, count) or 0)
    assert not exp.accepts(_meter(whole, whole_cost, 4))  # without a client timeout: a double count
    assert exp.accepts(
        _meter(whole, whole_cost, 4), client_timeout=True
    )  # the CLI gave up on a finished answer
    thrice = {k: exp.tokens[k] + 2 * count[k] for k in exp.tokens}
    assert not exp.accepts(
        _meter(thrice, exp.cost_usd + 2 * (cost_usd(MODEL, count) or 0), 5), client_timeout=True
    )
    assert exp.accepts(_meter(exp.tokens, exp.cost_usd, 3), client_timeout=True)  # strict cases still hold


def test_an_answer_begun_by_a_gateway_that_died_before_logging_it_counts_at_its_start_once(
    tmp_path: Path,
) -> None:
    exp, usages = _one_clean_leg(tmp_path)
    count = usages["count"]
    start = {k: v for k, v in {**count, "output_tokens": 1}.items() if k in exp.tokens}
    begun = {k: exp.tokens[k] + start[k] for k in exp.tokens}
    begun_cost = exp.cost_usd + (cost_usd(MODEL, start) or 0)
    assert not exp.accepts(_meter(begun, begun_cost, 4, incomplete=1))  # no death: not in the log, not billed
    assert exp.accepts(
        _meter(begun, begun_cost, 4, incomplete=1), unlogged_starts=1
    )  # one death: one begun answer
    two = {k: exp.tokens[k] + 2 * start[k] for k in exp.tokens}
    assert not exp.accepts(
        _meter(two, exp.cost_usd + 2 * (cost_usd(MODEL, start) or 0), 5, incomplete=2), unlogged_starts=1
    )  # more than the deaths allow
    whole = {k: exp.tokens[k] + count[k] for k in exp.tokens}
    assert not exp.accepts(
        _meter(whole, exp.cost_usd + (cost_usd(MODEL, count) or 0), 4), unlogged_starts=1
    )  # a whole answer the log never saw: counted twice or made up


def test_one_legs_account_holds_the_answers_the_workspace_counted_not_the_logs(tmp_path: Path) -> None:
    """CI's case: the killed gateway lost the log line of a whole answer it had sent (4 turns:
    start, 3 counts, leg done; the log shows 2 counts). The meter has it; it is not a double count."""
    files = soakjob.write_project(tmp_path, leg=4, handoff_at=None)
    usages = soakjob.rule_usages(files["scenario"])
    log = _log(("start", 2), ("count", 4), ("count", 8), ("leg done", 10))  # the count at 6 unlogged
    exp = soakjob.expected_of_one_leg(files["scenario"], log, turns=4)
    assert exp.complete == 5 and exp.cut == 0 and exp.by_rule == {"start": 1, "count": 3, "leg done": 1}
    tokens = {k: sum(n * usages[r][k] for r, n in exp.by_rule.items()) for k in exp.tokens}
    cost = sum(n * (cost_usd(MODEL, usages[r]) or 0) for r, n in exp.by_rule.items())
    assert exp.tokens == tokens and abs(exp.cost_usd - cost) < 1e-9
    assert exp.accepts(_meter(tokens, cost, 5))
    assert not soakjob.expected_usage(files["scenario"], log).accepts(
        _meter(tokens, cost, 5)
    )  # the log's account
    count = usages["count"]
    twice = {k: tokens[k] + count[k] for k in tokens}
    assert not exp.accepts(_meter(twice, cost + (cost_usd(MODEL, count) or 0), 6), unlogged_starts=1)
    assert not exp.accepts(_meter(tokens, cost, 6))  # one exchange more than the answers sent


def test_one_legs_account_keeps_the_answers_asked_for_again_from_the_log(tmp_path: Path) -> None:
    files = soakjob.write_project(tmp_path, leg=3, handoff_at=None)
    log = _log(("start", 2), ("count", 4), ("count", 4), ("count", 6), ("leg done", 8))
    exp = soakjob.expected_of_one_leg(files["scenario"], log, turns=3)
    assert exp.complete == 4 and exp.cut == 1
    start = {
        k: v
        for k, v in {**soakjob.rule_usages(files["scenario"])["count"], "output_tokens": 1}.items()
        if k in exp.tokens
    }
    begun = {k: exp.tokens[k] + start[k] for k in exp.tokens}
    assert exp.accepts(_meter(begun, exp.cost_usd + (cost_usd(MODEL, start) or 0), 5, incomplete=1))
    assert exp.accepts(_meter(exp.tokens, exp.cost_usd, 4))


def _turns(results: list[str]) -> list[dict]:
    """A conversation's messages: the prompt, then for each tool result the answer and the result."""
    messages: list[dict] = [{"role": "user", "content": soakjob.PROMPT}]
    for i, result in enumerate(results):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "sh count.sh"}}
                ],
            }
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": result}]}
        )
    return messages


def test_a_request_the_log_lost_is_found_in_the_next_one_of_its_session(tmp_path: Path) -> None:
    """The killed gateway lost the line of the request at 5 messages (count=2 answered); the
    request at 7 carries it whole, so the account holds its answer, under its rule."""
    files = soakjob.write_project(tmp_path, leg=4, handoff_at=None)
    results = ["count=1", "count=2", "count=3", "count=4\nLEG-DONE"]
    full = _turns(results)
    log = [
        {**row, "body": {"messages": full[: row["n_messages"]]}}
        for row in _log(("start", 1), ("count", 3), ("count", 7), ("leg done", 9))
    ]
    assert soakjob.unlogged_answers(files["scenario"], log) == [("count", MODEL)]
    exp = soakjob.expected_usage(files["scenario"], log)
    assert exp.by_rule == {"count": 3, "start": 1, "leg done": 1} and exp.complete == 5
    assert exp.tokens == soakjob.expected_of_one_leg(files["scenario"], log, turns=4).tokens
    # a whole log has nothing in between; a re-asked request is no gap either
    whole = [
        {**row, "body": {"messages": full[: row["n_messages"]]}}
        for row in _log(("start", 1), ("count", 3), ("count", 5), ("count", 5), ("count", 7), ("leg done", 9))
    ]
    assert soakjob.unlogged_answers(files["scenario"], whole) == []


def test_a_lost_answer_next_to_a_turn_of_three_messages_is_found(tmp_path: Path) -> None:
    """A turn may add 3 messages (a step's end adds one more user message), so a session can grow
    by an odd number with a request lost in between (CI: 27 -> 32 messages, the answer at 29
    metered whole and its log line lost with the gateway): the answer is found all the same."""
    files = soakjob.write_project(tmp_path, leg=4, handoff_at=None)
    full = _turns(["count=1", "count=2", "count=3"])
    full.insert(4, {"role": "user", "content": "a step's own extra message"})  # the turn at 3 adds 3
    log = [
        {**row, "body": {"messages": full[: row["n_messages"]]}}
        for row in _log(("start", 1), ("count", 3), ("count", 8))  # the request at 6 is lost
    ]
    assert soakjob.unlogged_answers(files["scenario"], log) == [("count", MODEL)]
    # the same growth with nothing lost: no answer but the logged ones
    whole = [
        {**row, "body": {"messages": full[: row["n_messages"]]}}
        for row in _log(("start", 1), ("count", 3), ("count", 6), ("count", 8))
    ]
    assert soakjob.unlogged_answers(files["scenario"], whole) == []


def _one_clean_leg(tmp_path: Path) -> tuple[soakjob.Expected, dict[str, dict[str, int]]]:
    """A leg of three answers, none cut, and the scenario's usages by rule."""
    files = soakjob.write_project(tmp_path, leg=5, handoff_at=None)
    exp = soakjob.expected_usage(files["scenario"], _log(("start", 2), ("count", 4), ("leg done", 6)))
    assert exp.complete == 3 and exp.cut == 0
    return exp, soakjob.rule_usages(files["scenario"])


def _one_metered_at_its_start(exp: soakjob.Expected, whole: dict[str, int]) -> tuple[dict[str, int], float]:
    """The totals when one answer of usage `whole` is metered at its first event instead."""
    start = {**whole, "output_tokens": 1}
    tokens = {k: exp.tokens[k] - whole.get(k, 0) + start[k] for k in exp.tokens}
    return tokens, exp.cost_usd - (cost_usd(MODEL, whole) or 0) + (cost_usd(MODEL, start) or 0)


def test_a_complete_answer_cut_before_its_message_delta_counts_at_its_start_once_per_death(
    tmp_path: Path,
) -> None:
    # The gateway meters an answer's final usage before it passes message_delta on; killed in
    # between, the meter holds the answer's start while the client kept its content and went on.
    exp, usages = _one_clean_leg(tmp_path)
    tokens, cost = _one_metered_at_its_start(exp, usages["count"])
    cut = _meter(tokens, cost, 3, incomplete=1)
    assert exp.accepts(cut, unlogged_starts=1)
    assert not exp.accepts(cut)  # no gateway died: the meter lost an answer's end
    assert not exp.accepts(_meter(tokens, cost, 4, incomplete=1), unlogged_starts=1)  # counted twice
    assert not exp.accepts(_meter(tokens, exp.cost_usd, 3, incomplete=1), unlogged_starts=1)  # cost too
    # a rule that sent no answer cannot be the one cut
    other, other_cost = _one_metered_at_its_start(exp, usages["handoff: document"])
    assert not exp.accepts(_meter(other, other_cost, 3, incomplete=1), unlogged_starts=1)
