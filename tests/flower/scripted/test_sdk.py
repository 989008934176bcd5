"""The scripted server driving the real bundled CLI through the real SDK (nothing mocked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ResultError, ResultMessage, query

from flower.scripted import ScriptedServer

pytestmark = pytest.mark.anyio


async def run(srv: ScriptedServer, tmp_path: Path, prompt: str, **env_kw) -> list:
    """One query() to the end; the messages it yielded (a ResultError after an error result is expected)."""
    ws = tmp_path / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    options = ClaudeAgentOptions(
        cwd=ws, env=srv.env(tmp_path / "cfg", **env_kw), permission_mode="bypassPermissions"
    )
    out: list = []
    try:
        async for message in query(prompt=prompt, options=options):
            out.append(message)
    except ResultError:
        assert out and isinstance(out[-1], ResultMessage) and out[-1].is_error
    return out


def result_of(messages: list) -> ResultMessage:
    results = [m for m in messages if isinstance(m, ResultMessage)]
    assert len(results) == 1, messages
    return results[0]


async def test_text_turn_ends_with_the_scripted_text(tmp_path):
    scn = {
        "rules": [
            {
                "name": "greet",
                "last_user_contains": "say hello",
                "reply": [{"text": "Hello from the script."}],
            }
        ]
    }
    with ScriptedServer(scn, keep_requests=True) as srv:
        messages = await run(srv, tmp_path, "say hello")
        reqs = srv.requests
    result = result_of(messages)
    assert (
        not result.is_error and result.result == "Hello from the script." and result.stop_reason == "end_turn"
    )
    assert result.usage["input_tokens"] == 10 and result.usage["output_tokens"] == 5
    assistant = [m for m in messages if isinstance(m, AssistantMessage)]
    assert [m.model for m in assistant] == ["scripted-model"]
    assert [(r["rule"], r["stream"], r["nth"]) for r in reqs] == [("greet", True, 1)]
    assert reqs[0]["session"] == result.session_id and reqs[0]["headers"]["x-api-key"] == "[redacted]"


async def test_read_tool_really_runs_and_its_result_comes_back(tmp_path):
    scn = {
        "rules": [
            {"name": "read", "last_user_contains": "read the note", "last_is_tool_result": False,
             "reply": [{"text": "Reading it."}, {"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/note.txt"}}}]},
            {"name": "answer", "last_is_tool_result": True, "tool_result_contains": "kiwi-7431",
             "reply": [{"text": "The note says kiwi-7431."}]},
        ]
    }  # fmt: skip
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "note.txt").write_text("secret fruit: kiwi-7431\n")
    with ScriptedServer(scn, keep_requests=True) as srv:
        messages = await run(srv, tmp_path, "please read the note")
        reqs = srv.requests
        assert not srv.unmatched
    assert result_of(messages).result == "The note says kiwi-7431."
    assert [r["rule"] for r in reqs] == ["read", "answer"]
    tool_use = reqs[1]["body"]["messages"][-1]["content"][0]
    assert tool_use["type"] == "tool_result" and "secret fruit: kiwi-7431" in str(tool_use["content"])
    sent_tool = next(
        b
        for m in reqs[1]["body"]["messages"]
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "tool_use"
    )
    assert sent_tool["input"] == {
        "file_path": str((tmp_path / "ws" / "note.txt").resolve())
    }  # {cwd} was the CLI's cwd
    assert tool_use["tool_use_id"] == sent_tool["id"]


async def test_a_500_without_retries_gives_the_synthetic_error(tmp_path):
    with ScriptedServer({"rules": [{"name": "boom", "error": 500}]}, keep_requests=True) as srv:
        messages = await run(srv, tmp_path, "anything")
        assert len(srv.requests) == 1  # CLAUDE_CODE_MAX_RETRIES=0
    synthetic = [m for m in messages if isinstance(m, AssistantMessage)]
    assert [(m.model, m.error) for m in synthetic] == [("<synthetic>", "server_error")]
    result = result_of(messages)
    assert result.is_error and result.api_error_status == 500 and "500" in (result.result or "")


async def test_a_cut_stream_is_survived_through_the_non_stream_fallback(tmp_path):
    scn = {
        "rules": [
            {"name": "cut", "stream": True, "reply": [{"text": "never seen"}], "cut_after": 3},
            {"name": "fallback", "stream": False, "reply": [{"text": "made it"}]},
        ]
    }
    with ScriptedServer(scn, keep_requests=True) as srv:
        messages = await run(srv, tmp_path, "go")
        reqs = srv.requests
    result = result_of(messages)
    assert not result.is_error and result.result == "made it"
    # With CLAUDE_CODE_MAX_RETRIES=0 the CLI goes straight from the cut stream to a non-streaming
    # request (the stream retry counts against the retry budget).
    assert [(r["rule"], r["stream"], r["outcome"]) for r in reqs] == [
        ("cut", True, "cut"),
        ("fallback", False, "response"),
    ]


async def test_a_stream_cut_twice_is_retried_once_then_falls_back(tmp_path):
    scn = {
        "rules": [
            {
                "name": "flaky",
                "sequence": [{"cut_after": 3}, {"cut_after": 3}, {"reply": [{"text": "third time"}]}],
            }
        ]
    }
    with ScriptedServer(scn, keep_requests=True) as srv:
        messages = await run(srv, tmp_path, "go", max_retries=1)
        reqs = srv.requests
    assert result_of(messages).result == "third time"
    assert [(r["stream"], r["step"], r["outcome"]) for r in reqs] == [
        (True, 0, "cut"),
        (True, 1, "cut"),
        (False, 2, "response"),
    ]


async def test_an_outage_is_ridden_out_by_the_cli_retries(tmp_path):
    scn = {
        "rules": [
            # long enough that the CLI's first retry (0.5 s on) finds it down, also under load
            {"name": "down", "times": 1, "outage_s": 2.5},
            {"name": "up", "reply": [{"text": "back up"}]},
        ]
    }
    with ScriptedServer(scn, keep_requests=True) as srv:
        messages = await run(srv, tmp_path, "go", max_retries=5)
        rules = [r["rule"] for r in srv.requests]
    result = result_of(messages)
    assert not result.is_error and result.result == "back up"
    assert rules == ["down", "up"]  # the refused attempt in between never reached the server
    # The CLI's transcript records why each retry happened: the drop, then the refused connect.
    transcript = next((tmp_path / "cfg" / "projects").glob(f"*/{result.session_id}.jsonl"))
    entries = [json.loads(line) for line in transcript.read_text().splitlines()]
    codes = [e["error"]["connection"]["code"] for e in entries if e.get("subtype") == "api_error"]
    assert codes[0] == "ECONNRESET" and codes[1:] and set(codes[1:]) == {"ECONNREFUSED"}, codes
