import itertools
import json
import shutil
import sqlite3
import subprocess
import sys
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ResultMessage,
    SessionStore,
    SystemMessage,
    project_key_for_directory,
    query,
)
from claude_agent_sdk.testing import run_session_store_conformance

from flower.context.store import SQLiteSessionStore

OPTIONAL = ("list_sessions", "list_session_summaries", "delete", "list_subkeys")
KEY = {"project_key": "proj", "session_id": "s1"}


@pytest.fixture
def store(tmp_path):
    s = SQLiteSessionStore(tmp_path / "sessions.db")
    yield s
    s.close()


# -- protocol ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_conformance_with_every_optional_method(tmp_path):
    for method in OPTIONAL:  # the suite silently skips what is not overridden: make sure nothing is
        assert getattr(SQLiteSessionStore, method) is not getattr(SessionStore, method), method
    counter = itertools.count()
    made: list[SQLiteSessionStore] = []

    def make_store():
        made.append(SQLiteSessionStore(tmp_path / f"conf-{next(counter)}.db"))
        return made[-1]

    await run_session_store_conformance(make_store)
    assert len(made) > 10  # a fresh db per contract
    for s in made:
        s.close()


def test_schema_is_upstreams(store):
    conn = sqlite3.connect(store.path)
    columns = {
        table: [(c[1], c[2], c[5]) for c in conn.execute(f"PRAGMA table_info({table})")]
        for table in ("entries", "meta", "summaries")
    }
    assert columns == {
        "entries": [
            ("store_key", "TEXT", 1),
            ("seq", "INTEGER", 2),
            ("uid", "TEXT", 0),
            ("payload", "TEXT", 0),
        ],
        "meta": [("store_key", "TEXT", 1), ("mtime", "INTEGER", 0), ("next_seq", "INTEGER", 0)],
        "summaries": [
            ("project_key", "TEXT", 1),
            ("session_id", "TEXT", 2),
            ("mtime", "INTEGER", 0),
            ("data", "TEXT", 0),
        ],
    }
    (index_sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'entries_uid'").fetchone()
    assert "UNIQUE" in index_sql and "(store_key, uid)" in index_sql and "uid IS NOT NULL" in index_sql
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()


@pytest.mark.anyio
async def test_uuid_is_an_idempotency_key_and_entries_without_uuid_are_kept(store):
    await store.append(KEY, [{"type": "user", "uuid": "u1"}, {"type": "title"}])
    await store.append(
        KEY, [{"type": "user", "uuid": "u1", "changed": True}, {"type": "title"}, {"uuid": "u2"}]
    )
    assert await store.load(KEY) == [
        {"type": "user", "uuid": "u1"},
        {"type": "title"},
        {"type": "title"},
        {"uuid": "u2"},
    ]
    # the same uuid under another key is a different entry
    await store.append({**KEY, "subpath": "subagents/agent-a"}, [{"uuid": "u1"}])
    assert await store.load({**KEY, "subpath": "subagents/agent-a"}) == [{"uuid": "u1"}]


@pytest.mark.anyio
async def test_keys_with_sql_wildcards_and_unicode_round_trip(store):
    odd = {"project_key": "p_%", "session_id": "s"}
    await store.append(odd, [{"text": "判定 ✓"}])
    await store.append({"project_key": "pX%", "session_id": "t"}, [{"n": 1}])
    assert [s["session_id"] for s in await store.list_sessions("p_%")] == ["s"]
    assert store.load_sync(odd) == [{"text": "判定 ✓"}]
    with pytest.raises(ValueError, match="subpath"):
        store.load_sync({**odd, "subpath": ""})


@pytest.mark.anyio
async def test_data_survives_reopening(tmp_path):
    first = SQLiteSessionStore(tmp_path / "sessions.db")
    await first.append(KEY, [{"uuid": "a"}])
    first.close()
    with pytest.raises(RuntimeError, match="closed"):
        first.load_sync(KEY)
    second = SQLiteSessionStore(tmp_path / "sessions.db")
    await second.append(KEY, [{"uuid": "a"}, {"uuid": "b"}])
    assert await second.load(KEY) == [{"uuid": "a"}, {"uuid": "b"}]
    second.close()


# -- sync helpers ------------------------------------------------------------------------------


def _assistant(uuid, usage, **extra):
    return {
        "type": "assistant",
        "uuid": uuid,
        "message": {"role": "assistant", "model": "m", "usage": usage},
        **extra,
    }


@pytest.mark.anyio
async def test_has_session_and_last_context_tokens(store):
    assert not store.has_session("proj", "s1")
    assert store.last_context_tokens("proj", "s1") is None
    assert store.load_sync(KEY) is None

    await store.append(KEY, [{"type": "user", "uuid": "u0"}])
    assert store.has_session("proj", "s1")
    assert store.last_context_tokens("proj", "s1") is None  # no model call yet

    usage = {
        "input_tokens": 7,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 30,
        "output_tokens": 99,
    }
    await store.append(KEY, [_assistant("a1", usage)])
    await store.append(
        KEY,
        [
            _assistant("a2", {"input_tokens": 5_000_000}, isSidechain=True),  # a subagent's call
            {
                "type": "assistant",
                "uuid": "a3",
                "message": {"model": "<synthetic>", "usage": {"input_tokens": 0}},
            },
            {"type": "user", "uuid": "u1"},
        ],
    )
    await store.append(
        {**KEY, "subpath": "subagents/agent-x"}, [_assistant("a4", {"input_tokens": 9_000_000})]
    )
    assert store.last_context_tokens("proj", "s1") == 1037
    assert not store.has_session("proj", "other")


# -- several processes -------------------------------------------------------------------------

APPENDER = """
import asyncio, sys
from flower.context.store import SQLiteSessionStore
db, worker = sys.argv[1], sys.argv[2]
async def main():
    store = SQLiteSessionStore(db)
    for i in range(25):
        key = {"project_key": "proj", "session_id": "shared"}
        await store.append(key, [{"uuid": f"{worker}-{i}"}, {"w": worker, "i": i}])
        await store.append({"project_key": "proj", "session_id": f"own-{worker}"}, [{"i": i}])
    store.close()
asyncio.run(main())
"""


@pytest.mark.slow
def test_parallel_processes_append_without_losing_entries(tmp_path):
    db = tmp_path / "sessions.db"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(db), str(w)], cwd=tmp_path, stderr=subprocess.PIPE
        )
        for w in range(4)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()

    store = SQLiteSessionStore(db)
    shared = store.load_sync({"project_key": "proj", "session_id": "shared"})
    assert len(shared) == 4 * 25 * 2
    for w in map(str, range(4)):
        # each writer's own order survives interleaving: uuid entry, then its partner
        mine = [e for e in shared if e.get("w") == w or e.get("uuid", "").startswith(f"{w}-")]
        assert mine == [e for i in range(25) for e in ({"uuid": f"{w}-{i}"}, {"w": w, "i": i})]
        assert len(store.load_sync({"project_key": "proj", "session_id": f"own-{w}"})) == 25
    store.close()


# -- the real CLI: mirror, lose the config dir, resume from the store in another process --------


def _sse(text: str) -> bytes:
    usage = {
        "input_tokens": 10,
        "cache_read_input_tokens": 200,
        "cache_creation_input_tokens": 3,
        "output_tokens": 1,
    }
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-test",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


@contextmanager
def sse_server():
    """Minimal Messages API: every request gets the text reply `pong <n>`; bodies are logged."""
    requests: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if "count_tokens" in self.path:
                return self._send(200, "application/json", b'{"input_tokens": 10}')
            requests.append(body)
            self._send(200, "text/event-stream", _sse(f"pong {len(requests)}"))

        def _send(self, status, ctype, payload):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()


def _cli_env(base_url: str, config_dir: Path) -> dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "IS_SANDBOX": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }


def _texts(request: dict) -> str:
    """All message text of one model request, flattened (content may be a string or blocks)."""
    return json.dumps(request["messages"], ensure_ascii=False)


RESUMER = """
import asyncio, json, sys
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query
from flower.context.store import SQLiteSessionStore
db, cwd, session_id, env = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
async def main():
    store = SQLiteSessionStore(db)
    options = ClaudeAgentOptions(cwd=cwd, env=env, resume=session_id, session_store=store,
                                 session_store_flush="eager", permission_mode="bypassPermissions")
    async for m in query(prompt="second question", options=options):
        if isinstance(m, ResultMessage):
            print(json.dumps({"session_id": m.session_id, "result": m.result, "is_error": m.is_error}))
    store.close()
asyncio.run(main())
"""


@pytest.mark.slow
@pytest.mark.anyio
async def test_resume_from_store_in_a_new_process_after_config_dir_is_gone(tmp_path):
    workspace, config_a, config_b = tmp_path / "ws", tmp_path / "cfg-a", tmp_path / "cfg-b"
    for d in (workspace, config_a, config_b):
        d.mkdir()
    db = tmp_path / "runs" / "sessions.db"
    project_key = project_key_for_directory(str(workspace))

    with sse_server() as (base_url, requests):
        store = SQLiteSessionStore(db)
        options = ClaudeAgentOptions(
            cwd=str(workspace),
            env=_cli_env(base_url, config_a),
            session_store=store,
            session_store_flush="eager",
            permission_mode="bypassPermissions",
        )
        session_id, result = None, None
        async for m in query(prompt="first question", options=options):
            if isinstance(m, SystemMessage) and m.subtype == "init":
                session_id = m.data["session_id"]
            if isinstance(m, ResultMessage):
                result = m
        assert result is not None and not result.is_error and result.result == "pong 1"

        # The mirror landed in sessions.db under the workspace's project key.
        entries = store.load_sync({"project_key": project_key, "session_id": session_id})
        assert "first question" in json.dumps(entries) and "pong 1" in json.dumps(entries)
        assert store.has_session(project_key, session_id)
        assert store.last_context_tokens(project_key, session_id) == 213
        assert [s["session_id"] for s in await store.list_sessions(project_key)] == [session_id]
        store.close()

        shutil.rmtree(config_a)  # the local transcript is gone: only the store remembers
        first_turn_requests = len(requests)
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                RESUMER,
                str(db),
                str(workspace),
                session_id,
                json.dumps(_cli_env(base_url, config_b)),
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert child.returncode == 0, child.stderr[-3000:]
        resumed = json.loads(child.stdout.strip().splitlines()[-1])

    assert resumed == {"session_id": session_id, "result": f"pong {len(requests)}", "is_error": False}
    second = requests[first_turn_requests:]
    assert second, "the resumed run made no model request"
    history = _texts(second[-1])
    assert "first question" in history and "pong 1" in history and "second question" in history

    # The resumed turn was mirrored under the same session id, after the first turn.
    store = SQLiteSessionStore(db)
    text = json.dumps(store.load_sync({"project_key": project_key, "session_id": session_id}))
    assert text.index("first question") < text.index("pong 1") < text.index("second question")
    assert text.index("second question") < text.rindex(f"pong {len(requests)}")
    store.close()
