"""Context economy on the real CLI: spill (PostToolUse hook) and trim on load (on resume, old
large tool results become pointers to files kept on disk).

What the model is sent is read from the scripted server's request log; what is kept is read
from disk (the spill/trim files) and from sessions.db."""

from __future__ import annotations

import sqlite3

import pytest

from flower import AgentSpec
from flower.runtime.engine import Runtime
from tests.rig import message_requests, scripted

pytestmark = pytest.mark.anyio

SPEC = AgentSpec("reader", allowed_tools=["Read"])


def tool_results(request: dict) -> list[str]:
    out = []
    for msg in request["body"]["messages"]:
        for block in msg.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                c = block.get("content")
                out.append(c if isinstance(c, str) else "".join(b.get("text", "") for b in c or []))
    return out


def make_runtime(tmp_path, srv, **kw) -> Runtime:
    return Runtime(
        workspace=tmp_path / "ws",
        run_dir=tmp_path / "runs",
        env=srv.env(tmp_path / "cfg"),
        resilience=False,
        **kw,
    )


SPILL_SCENARIO = {
    "rules": [
        {
            "name": "read",
            "when": {"last_user_contains": "read both", "last_is_tool_result": False},
            "reply": [
                {"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/big.txt"}}},
                {"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/small.txt"}}},
            ],
        },
        {"name": "done", "when": {"last_is_tool_result": True}, "reply": [{"text": "read both"}]},
    ]
}


@pytest.mark.parametrize("workbench", [True, False], ids=["workbench", "no-workbench"])
async def test_spill_moves_large_tool_results_to_a_file_and_leaves_a_pointer(tmp_path, workbench):
    ws = tmp_path / "ws"
    ws.mkdir()
    big = "".join(f"line {i:04d} " + "x" * 60 + "\n" for i in range(150))  # ~11,000 chars
    (ws / "big.txt").write_text(big)
    (ws / "small.txt").write_text("just a little text\n")
    with scripted(tmp_path, SPILL_SCENARIO) as srv:
        rt = make_runtime(tmp_path, srv, workbench=tmp_path / "wb" if workbench else False)
        try:
            res = await rt.run(SPEC, "read both")
        finally:
            rt.close()
        sent = tool_results(message_requests(srv)[-1])
    assert res.ok, res.error
    big_sent = next(t for t in sent if "line 0000" in t)
    assert any("just a little text" in t for t in sent)  # small results are untouched
    if not workbench:
        assert "line 0149" in big_sent and "[spilled:" not in big_sent
        return
    # The model got a pointer plus the head; the file holds the full text.
    assert "[spilled: " in big_sent and "line 0149" not in big_sent and len(big_sent) < 1000
    files = list((tmp_path / "wb" / "spill").glob("*.txt"))
    assert len(files) == 1 and files[0].read_text() == big and str(files[0]) in big_sent
    # The transcript in sessions.db holds the pointer too: a resume does not bring the bulk back.
    with sqlite3.connect(tmp_path / "runs" / "sessions.db") as db:
        payloads = "".join(p for (p,) in db.execute("SELECT payload FROM entries"))
    assert "[spilled: " in payloads


TRIM_SCENARIO = {
    "rules": [
        {"name": "next", "when": {"last_user_contains": "what next"}, "reply": [{"text": "next thing"}]},
        {
            "name": "read-all",
            "when": {"last_user_contains": "read all", "last_is_tool_result": False},
            "reply": [
                {"tool_use": {"name": "Read", "input": {"file_path": f"{{cwd}}/f{i:02d}.txt"}}}
                for i in range(21)
            ],
        },
        {"name": "done", "when": {"last_is_tool_result": True}, "reply": [{"text": "read all 21"}]},
    ]
}


async def test_trim_on_load_keeps_the_newest_20_large_results_and_moves_the_rest_to_files(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(21):
        (ws / f"f{i:02d}.txt").write_text(f"file {i:02d}\n" + ("abcdefghij" * 250) + "\n")  # ~2,500 chars
    with scripted(tmp_path, TRIM_SCENARIO) as srv:
        rt = make_runtime(tmp_path, srv)
        try:
            first = await rt.run(SPEC, "read all")
        finally:
            rt.close()
        assert first.ok, first.error
        sent_by: dict[bool, list[str]] = {}
        for trim in (False, True):
            rt = make_runtime(tmp_path, srv, trim=trim)
            try:
                again = await rt.run(SPEC, "what next", resume=first.session_id)
            finally:
                rt.close()
            assert again.ok and again.session_id == first.session_id
            sent_by[trim] = tool_results(message_requests(srv)[-1])
    untrimmed, trimmed = sent_by[False], sent_by[True]
    assert len(untrimmed) == len(trimmed) == 21
    assert not any(t.startswith("[trimmed: ") for t in untrimmed)  # trim=False: only trimming is off
    pointers = [t for t in trimmed if t.startswith("[trimmed: ")]
    assert len(pointers) == 1  # the oldest result (parallel reads finish in any order); the newest 20 stay
    path = pointers[0].split("→ ", 1)[1].split(";", 1)[0]
    kept = open(path).read()
    name = kept.split("\n", 1)[0].split("\t")[-1]  # Read numbers its lines: "1\tfile NN"
    assert name.startswith("file ") and len(kept) >= 2500 and name in pointers[0]  # moved, not lost
    full = [t for t in trimmed if not t.startswith("[trimmed: ")]
    assert not any(name in t for t in full) and all(len(t) >= 2500 for t in full)
