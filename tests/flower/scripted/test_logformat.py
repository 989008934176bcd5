"""The request log's v2 format (flower/scripted/logformat.py): new messages only, digests, rebuild."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flower.scripted import LOG_FORMAT, LogFormatError, read_request_log
from flower.scripted.log import RequestLog
from flower.scripted.logformat import MAX_BRANCHES, DeltaEncoder
from flower_batch.gateway.server.routing import PerJobLog

TOOLS = [
    {"name": f"Tool{i}", "description": "does things " * 20, "input_schema": {"type": "object"}}
    for i in range(8)
]
SYSTEM = [{"type": "text", "text": "You are the agent. " * 40, "cache_control": {"type": "ephemeral"}}]
HEADERS = {
    "x-claude-code-session-id": "s-1",
    "user-agent": "claude-cli/2.0 (external, sdk-py)",
    "x-api-key": "[redacted]",
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
}


def message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}]}


def with_cache_mark(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The CLI puts cache_control on the last block of the last message: it moves every request."""
    out = copy.deepcopy(messages)
    out[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return out


def record(
    messages: list[dict[str, Any]],
    *,
    session: str = "s-1",
    nth: int = 1,
    prefix: str = "/j/job-1",
    system: Any = SYSTEM,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    body = {
        "model": "claude-test",
        "messages": with_cache_mark(messages),
        "system": system,
        "tools": TOOLS,
        "max_tokens": 32000,
        "stream": True,
    }
    return {
        "time": 1.0 + nth,
        "method": "POST",
        "path": prefix + "/v1/messages?beta=true",
        "prefix": prefix,
        "endpoint": "messages",
        "session": session,
        "nth": nth,
        "model": "claude-test",
        "stream": True,
        "n_messages": len(messages),
        "body_bytes": len(json.dumps(body)),
        "rule": "r",
        "step": None,
        "status": 200,
        "outcome": "stream",
        "usage": {"input_tokens": 10, "output_tokens": 2},
        "headers": {**HEADERS, "x-claude-code-session-id": session, **(headers or {})},
        "body": body,
    }


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def conversation(turns: int, size: int = 3000) -> list[list[dict[str, Any]]]:
    """The message lists of `turns` successive requests: each resends the history plus two messages."""
    history: list[dict[str, Any]] = [message("user", "start " + "x" * size)]
    out = [list(history)]
    for i in range(1, turns):
        history += [
            message("assistant", f"answer {i} " + "a" * size),
            message("user", f"result {i} " + "r" * size),
        ]
        out.append(list(history))
    return out


def test_growing_conversation_logs_only_new_messages_and_rebuilds_every_request(tmp_path):
    path = tmp_path / "log.jsonl"
    log = RequestLog(path)
    originals = [record(msgs, nth=n) for n, msgs in enumerate(conversation(30), 1)]
    for rec in originals:
        log.add(rec)
    entries = lines(path)
    assert all(e["format"] == LOG_FORMAT for e in entries)
    assert entries[0]["full"] == "first" and entries[0]["messages"]["from"] == 0
    for prev, entry in zip(originals, entries[1:], strict=False):
        delta = entry["messages"]
        assert "full" not in entry and delta["from"] == prev["n_messages"] and len(delta["new"]) == 2
        assert set(entry["same"]) == {"headers", "system", "tools"} and "headers" not in entry
        # the shape of the request stays whole
        assert entry["n_messages"] == delta["from"] + 2 and entry["usage"] == {
            "input_tokens": 10,
            "output_tokens": 2,
        }
    for entry, line in zip(entries[1:], path.read_text().splitlines()[1:], strict=True):
        new_bytes = len(json.dumps(entry["messages"]["new"], ensure_ascii=False, separators=(",", ":")))
        assert len(line.encode()) <= 2048 + new_bytes
    rebuilt = list(read_request_log(path, strict=True))
    assert rebuilt == originals  # every full request, cache_control markers where they were


def test_a_shrunk_or_changed_history_is_logged_whole_with_a_marker(tmp_path):
    log = PerJobLog(tmp_path)
    (tmp_path / "job-1").mkdir()  # the orchestrator makes a job's folder; the gateway only its logs/
    path = tmp_path / "job-1" / "logs" / "gateway.jsonl"
    convo = conversation(6)
    handoff = [message("user", "summary of the earlier work " + "s" * 500)]
    edited = copy.deepcopy(convo[5])
    edited[2]["content"][0]["text"] = "a pruned tool result"
    originals = [
        record(convo[3], nth=1),
        record(convo[4], nth=2),
        record(handoff, nth=3),  # shrank: a handoff
        record(handoff + [message("assistant", "ok"), message("user", "go")], nth=4),
        record(edited, nth=5),  # same length as before or longer, but an earlier message changed
        record(edited, nth=6, system="a new system prompt " * 10),  # a changed field, same history
    ]
    for rec in originals:
        log.add(rec, owner="job-1")  # the job whose valid token it carried (JobRouter.log_owner)
    entries = lines(path)
    assert [e.get("full") for e in entries] == ["first", None, "changed", None, "changed", None]
    assert entries[2]["messages"]["from"] == 0 and len(entries[2]["messages"]["new"]) == 1
    assert entries[3]["messages"]["from"] == 1
    assert entries[5]["messages"]["new"] == [] and entries[5]["body"]["system"].startswith("a new system")
    assert "system" not in entries[5].get("same", [])
    assert list(read_request_log(path, strict=True)) == originals


def test_interleaved_conversations_of_one_session_each_stay_deltas(tmp_path):
    """A subagent shares its parent's session id: both conversations are followed."""
    path = tmp_path / "log.jsonl"
    log = RequestLog(path)
    parent, child = (
        conversation(5),
        [[message("user", "subtask " + "q" * 800)] + m[1:] for m in conversation(5)],
    )
    originals = []
    for n in range(5):
        originals += [record(parent[n], nth=2 * n + 1), record(child[n], nth=2 * n + 2, system="sub " * 50)]
    for rec in originals:
        log.add(rec)
    entries = lines(path)
    assert [e.get("full") for e in entries[:2]] == ["first", "changed"]
    assert all("full" not in e and len(e["messages"]["new"]) == 2 for e in entries[2:])
    assert list(read_request_log(path, strict=True)) == originals


def test_other_sessions_jobs_and_endpoints_are_followed_apart(tmp_path):
    log = PerJobLog(tmp_path)
    convo = conversation(3)
    originals = {"job-1": [], "job-2": []}
    for job in originals:
        (tmp_path / job).mkdir()
    for n in range(3):
        for job in originals:
            for session in ("a", "b"):
                rec = record(convo[n], nth=n + 1, session=session, prefix=f"/j/{job}")
                originals[job].append(rec)
                log.add(rec, owner=job)
    for job, recs in originals.items():
        path = tmp_path / job / "logs" / "gateway.jsonl"
        assert sum("full" in e for e in lines(path)) == 2  # one first request per session
        assert list(read_request_log(path, strict=True)) == recs


def test_requests_without_messages_and_v1_lines_read_as_they_are(tmp_path):
    path = tmp_path / "log.jsonl"
    v1 = {**record(conversation(2)[1]), "prefix": "", "path": "/v1/messages"}
    v1.pop("usage")
    v1.pop("body_bytes")
    path.write_text(json.dumps(v1) + "\n")  # an old, unversioned file: bodies in full
    log = RequestLog(path)
    hello = {**record(conversation(1)[0]), "endpoint": "hello", "body": {}, "n_messages": 0}
    grown = record(conversation(3)[2], prefix="")
    log.add(hello)
    log.add(grown)  # the v1 line was not seen by this writer: logged whole
    got = list(read_request_log(path))
    assert got == [v1, hello, grown]
    assert "format" not in lines(path)[0] and lines(path)[2]["full"] == "first"


def test_a_newer_or_foreign_format_is_refused_in_one_line(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps({"format": "flower-scripted/requests@3", "nth": 1}) + "\n")
    with pytest.raises(LogFormatError) as err:
        list(read_request_log(path))
    assert str(err.value).count("\n") == 0 and "line 1" in str(err.value) and "upgrade" in str(err.value)
    path.write_text(json.dumps({"format": "flower-batch/recording@1", "seq": 1}) + "\n")
    with pytest.raises(LogFormatError, match="not a request log"):
        list(read_request_log(path))


def test_a_missing_line_is_detected_not_rebuilt_wrong(tmp_path):
    path = tmp_path / "log.jsonl"
    log = RequestLog(path)
    for n, msgs in enumerate(conversation(4), 1):
        log.add(record(msgs, nth=n))
    kept = path.read_text().splitlines()
    path.write_text("\n".join(kept[:1] + kept[2:]) + '\n{"torn')  # line 2 lost, a torn last line
    got = list(read_request_log(path))
    assert got[0]["body"] is not None and got[1]["body"] is None and "line 2" in got[1]["body_problem"]
    assert len(got) == 3
    with pytest.raises(LogFormatError, match="cannot rebuild"):
        list(read_request_log(path, strict=True))


def test_a_line_torn_by_a_killed_writer_costs_only_itself(tmp_path):
    """A gateway killed mid-line leaves a torn last line; the restarted gateway's log (a new
    writer) starts a fresh line, so its first request and every one built on it rebuild whole."""
    convo = conversation(6)
    first = PerJobLog(tmp_path)
    (tmp_path / "job-1").mkdir()
    for n, msgs in enumerate(convo[:3], 1):
        first.add(record(msgs, nth=n, prefix="/j/job-1"), owner="job-1")
    path = tmp_path / "job-1" / "logs" / "gateway.jsonl"
    torn = json.dumps(lines(path)[-1])[:40]
    with path.open("a") as out:
        out.write(torn)  # the fourth request's line, cut by the kill
    restarted = PerJobLog(tmp_path)
    for n, msgs in enumerate(convo[4:], 5):
        restarted.add(record(msgs, nth=n, prefix="/j/job-1"), owner="job-1")
    got = list(read_request_log(path, strict=True))
    assert [r["nth"] for r in got] == [1, 2, 3, 5, 6]
    assert [r["body"]["messages"] for r in got] == [with_cache_mark(m) for m in convo[:3] + convo[4:]]


def test_no_record_is_retained_and_followed_conversations_are_bounded(tmp_path):
    log = RequestLog(tmp_path / "log.jsonl")
    log._encoder = DeltaEncoder(max_conversations=8)
    convo = conversation(3, size=50)
    for n in range(200):
        log.add(record(convo[n % 3], nth=n, session=f"s-{n % 40}"))
    assert log.retained() == 0 and log._records == []
    assert len(log._encoder._sessions) <= 8 and log._encoder.conversations() <= 8 * MAX_BRANCHES
    with pytest.raises(RuntimeError, match="keep_requests=True"):
        log.snapshot()
    kept = RequestLog(None, keep=True)
    kept.add(record(convo[0]))
    assert kept.snapshot() == [record(convo[0])]


def raw_of(rec: dict[str, Any], **dumps: Any) -> bytes:
    return json.dumps(rec["body"], ensure_ascii=False, **dumps).encode()


def test_with_the_raw_body_the_history_is_proven_without_serialising_it(tmp_path):
    path = tmp_path / "log.jsonl"
    log = RequestLog(path)
    originals = [record(msgs, nth=n) for n, msgs in enumerate(conversation(20), 1)]
    originals[7]["body"]["messages"][0]["content"][0]["text"] += " 中文"  # non-ASCII: a changed history
    for rec in originals:
        log.add(rec, raw=raw_of(rec, separators=(",", ":")))
    entries = lines(path)
    assert [n for n, e in enumerate(entries) if "full" in e] == [0, 7]  # 8 goes on from 6's branch
    assert entries[8]["messages"]["from"] == originals[6]["n_messages"]
    # from the raw text: all but the first two (the first has no unmarked message) and the changed one
    assert log._encoder.fast_hits == 17
    assert list(read_request_log(path, strict=True)) == originals


def test_raw_text_that_is_not_the_parsed_body_falls_back_to_the_slow_path(tmp_path):
    path = tmp_path / "log.jsonl"
    log = RequestLog(path)
    convo = conversation(9)
    honest = copy.deepcopy(convo[6])
    for later in convo[6:]:  # from request 6 on, an early message was edited (a pruning)
        later[1] = message("assistant", "pruned")
    originals = [record(m, nth=n) for n, m in enumerate(convo, 1)]
    raws = [raw_of(r) for r in originals]  # default separators: ", " and ": "
    raws[3] = raw_of(originals[3], indent=1)  # reformatted: same values, other bytes
    # request 6's raw text starts with a duplicate key holding the history unedited: its bytes
    # are the ones remembered, but the body was parsed from the other (last) `messages`
    lie = json.dumps(with_cache_mark(honest))
    raws[6] = raws[6].replace(b'{"model"', b'{"messages": ' + lie.encode() + b', "model"', 1)
    for rec, raw in zip(originals, raws, strict=True):
        log.add(rec, raw=raw)
    entries = lines(path)
    assert [e.get("full") for e in entries] == ["first"] + [None] * 5 + ["changed", None, None]
    # proven from the raw text: 2, 5 and 8 only (3 reformatted, 4 after it, 6 lies, 7 after it)
    assert log._encoder.fast_hits == 3
    assert list(read_request_log(path, strict=True)) == originals


OPS = st.lists(
    st.sampled_from(["grow", "grow", "grow", "shrink", "edit", "switch", "system"]), min_size=1, max_size=25
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, with_raw=st.booleans())
def test_any_history_rebuilds_exactly(tmp_path, ops, with_raw):
    path = tmp_path / "prop.jsonl"
    path.unlink(missing_ok=True)
    log = RequestLog(path)
    convs = [[message("user", "a")], [message("user", "b")]]
    system, current, originals = "sys " * 30, 0, []
    for n, op in enumerate(ops, 1):
        msgs = convs[current]
        if op == "grow":
            msgs += [message("assistant", f"r{n}"), message("user", f"u{n} " * (n % 5))]
        elif op == "shrink" and len(msgs) > 1:
            del msgs[: len(msgs) // 2]
        elif op == "edit":
            msgs[0] = message("user", f"edited {n}")
        elif op == "switch":
            current = 1 - current
        elif op == "system":
            system = f"system {n} " * 20
        rec = record(convs[current], nth=n, system=system)
        originals.append(copy.deepcopy(rec))
        log.add(rec, raw=raw_of(rec) if with_raw else None)
    assert list(read_request_log(path, strict=True)) == originals
