"""PruningSessionStore / prune(): cleaned copies of transcripts built from the CLI's real shapes."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import uuid as uuidlib

import pytest
from claude_agent_sdk import InMemorySessionStore, SessionStore
from claude_agent_sdk.testing import run_session_store_conformance

from flower.catalogue.context import CUT_OFF_NOTE, INTERRUPTED_NOTE
from flower.context.pruning import (
    EXPIRED_NOTE,
    PruningSessionStore,
    chain,
    chain_problems,
    prune,
    result_text,
    tool_results,
    tool_uses,
)

SID = "5b0f9d1e-8a55-4c1e-9e4f-3f3c1c2d7a10"
KEY = {"project_key": "-work-ws", "session_id": SID}


class Transcript:
    """Builds entries the way CLI 2.1.327 writes them (fact sheet §5.1, §5.2, §6)."""

    def __init__(self) -> None:
        self.entries: list[dict] = []
        self.last: str | None = None
        self._n = itertools.count(1)
        self._msg = itertools.count(1)

    def _entry(self, type_: str, parent: str | None = "last", **fields) -> dict:
        n = next(self._n)
        entry = {
            "parentUuid": self.last if parent == "last" else parent,
            "isSidechain": False,
            "type": type_,
            "uuid": str(uuidlib.UUID(int=n)),
            "timestamp": f"2026-11-30T09:{n // 60:02d}:{n % 60:02d}.000Z",
            "userType": "external",
            "entrypoint": "sdk-py",
            "cwd": "/work/ws",
            "sessionId": SID,
            "version": "2.1.327",
            "gitBranch": "HEAD",
            **fields,
        }
        self.entries.append(entry)
        self.last = entry["uuid"]
        return entry

    def meta(self, type_: str, **fields) -> dict:
        entry = {"type": type_, "sessionId": SID, **fields}  # no uuid / parentUuid
        self.entries.append(entry)
        return entry

    def prompt(self, text: str, parent: str | None = "last") -> dict:
        self.meta("queue-operation", operation="enqueue", content=text)
        self.meta("queue-operation", operation="dequeue")
        return self._entry("user", parent, message={"role": "user", "content": text}, promptSource="sdk")

    def attachment(self, kind: str = "date") -> dict:
        return self._entry("attachment", attachment={"type": kind})

    def _assistant(self, block: dict, msg_id: str | None, stop: str) -> dict:
        return self._entry(
            "assistant",
            message={
                "id": msg_id or f"msg_{next(self._msg)}",
                "type": "message",
                "role": "assistant",
                "model": "claude-opus-5-5",
                "content": [block],
                "stop_reason": stop,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            },
            requestRef=str(uuidlib.uuid4()),
            apiBlockIndex=0,
        )

    def say(self, text: str, msg_id: str | None = None) -> dict:
        return self._assistant({"type": "text", "text": text}, msg_id, "end_turn")

    def call(self, name: str, tool_input: dict, msg_id: str | None = None) -> str:
        tool_id = f"toolu_{next(self._n):04d}"
        self._assistant(
            {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}, msg_id, "tool_use"
        )
        return tool_id

    def bash(self, command: str, description: str = "run it", msg_id: str | None = None) -> str:
        return self.call("Bash", {"command": command, "description": description}, msg_id)

    def result(
        self, tool_id: str, content, *, is_error: bool = False, parent: str | None = "last", **fields
    ) -> dict:
        block = {"tool_use_id": tool_id, "type": "tool_result", "content": content}
        if is_error:
            block["is_error"] = True
        fields.setdefault(
            "toolUseResult", {"stdout": content if isinstance(content, str) else "", "stderr": ""}
        )
        fields.setdefault(
            "permissionDecision", {"decision": "accept", "source": "config", "reasonType": "mode"}
        )
        source = self.last if parent == "last" else parent
        return self._entry(
            "user",
            parent,
            message={"role": "user", "content": [block]},
            sourceToolAssistantUUID=source,
            **fields,
        )

    def denial(self, tool_id: str, kind: str = "user-rejected") -> dict:
        text = (
            "touch in '/work/ws' needs approval. The path is inside the working directories for this session."
        )
        return self.result(
            tool_id,
            text,
            is_error=True,
            toolUseResult="Error: " + text,
            toolDenialKind=kind,
            permissionDecision={"decision": "reject", "source": "config", "reasonCode": "unknown"},
        )

    def callback_denial(self, tool_id: str) -> dict:
        # can_use_tool -> PermissionResultDeny(message=...): no toolDenialKind recorded.
        return self.result(
            tool_id,
            "not allowed here",
            is_error=True,
            toolUseResult="Error: not allowed here",
            permissionDecision={"decision": "reject", "source": "callback"},
        )

    def api_retry(self, attempt: int) -> dict:
        return self._entry(
            "system",
            subtype="api_error",
            level="error",
            error={"message": "Connection error.", "status": None, "connection": {"code": "ECONNREFUSED"}},
            retryAttempt=attempt,
            maxRetries=2,
            retryInMs=500,
            source="request_retry",
        )

    def synthetic_error(self) -> dict:
        text = "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)"
        entry = self._entry(
            "assistant",
            message={
                "id": str(uuidlib.uuid4()),
                "type": "message",
                "role": "assistant",
                "model": "<synthetic>",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "stop_sequence",
                "usage": {"input_tokens": 0, "output_tokens": 0},
            },
            isApiErrorMessage=True,
            error="server_error",
            failedResponseHadNoToolCall=True,
            apiError="connection_failed",
        )
        return entry


def uuids(entries):
    return [e["uuid"] for e in entries if e.get("uuid")]


def assert_chain_ok(entries):
    assert chain_problems(entries) == []


def all_message_entries_on_chain(entries):
    on_chain = {e["uuid"] for e in chain(entries)}
    return all(e["uuid"] in on_chain for e in entries if e.get("uuid"))


def fingerprint(rows) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


# --- the chain helper itself ---


def test_chain_problems_detects_gaps_and_dangling_parents():
    t = Transcript()
    t.prompt("hi")
    t.say("hello")
    t.prompt("more")
    t.say("sure")
    assert_chain_ok(t.entries)
    assert all_message_entries_on_chain(t.entries)

    cut = [e for e in t.entries if e.get("uuid") != t.entries[3]["uuid"]]  # drop the first reply naively
    assert any("not an earlier entry" in p for p in chain_problems(cut))
    assert any("not at a root" in p for p in chain_problems(cut))
    assert len(chain(cut)) == 2  # a naive drop loses everything before the gap


# --- 1. synthetic API errors ---


def failed_then_resumed() -> Transcript:
    t = Transcript()
    t.prompt("build the thing")
    t.attachment()
    t.say("on it")
    t.prompt("now the tests")
    t.attachment()
    t.api_retry(1)
    t.api_retry(2)
    t.synthetic_error()
    t.meta("last-prompt", lastPrompt="now the tests")
    t.meta("cost-state", costUSD=0.0)
    # The resumed prompt hangs below the synthetic leaf.
    t.prompt("上一轮在中途被中断")
    t.say("continuing")
    return t


def test_synthetic_errors_and_retry_entries_are_dropped_and_children_relinked():
    t = failed_then_resumed()
    out = prune(t.entries)
    assert not any(e.get("isApiErrorMessage") for e in out)
    assert not any((e.get("message") or {}).get("model") == "<synthetic>" for e in out)
    assert not any(e.get("subtype") == "api_error" for e in out)
    assert len(out) == len(t.entries) - 3
    assert_chain_ok(out)
    assert all_message_entries_on_chain(out)
    resumed = next(e for e in out if (e.get("message") or {}).get("content") == "上一轮在中途被中断")
    first_retry = next(e for e in t.entries if e.get("subtype") == "api_error")
    attachment_before_errors = next(e for e in t.entries if e.get("uuid") == first_retry["parentUuid"])
    assert attachment_before_errors["type"] == "attachment"
    assert resumed["parentUuid"] == attachment_before_errors["uuid"]
    # Non-message entries stay where they were.
    assert [e["type"] for e in out if not e.get("uuid")].count("queue-operation") == 6


def test_a_failed_turn_at_the_end_keeps_a_neutral_placeholder():
    # CLI 2.1.327 never sends an isApiErrorMessage entry; as the leaf it makes the CLI merge the
    # failed prompt with the resume prompt (a bare user leaf gets "No response requested.").
    t = Transcript()
    prompt = t.prompt("deploy")
    t.api_retry(1)
    t.api_retry(2)
    synthetic = t.synthetic_error()
    t.meta("last-prompt", lastPrompt="deploy")
    out = prune(t.entries)
    kept = [e for e in out if e.get("type") == "assistant"]
    assert [e["uuid"] for e in kept] == [synthetic["uuid"]]
    assert kept[0]["message"]["content"] == [{"type": "text", "text": CUT_OFF_NOTE}]
    assert kept[0]["isApiErrorMessage"] is True and kept[0]["parentUuid"] == prompt["uuid"]
    assert "API Error" not in json.dumps(out)
    assert_chain_ok(out)

    resumed = t.prompt("继续")  # the CLI parents the resume prompt to that leaf
    t.say("done")
    out = prune(t.entries)
    assert synthetic["uuid"] not in uuids(out)
    assert next(e for e in out if e.get("uuid") == resumed["uuid"])["parentUuid"] == prompt["uuid"]
    assert_chain_ok(out)


def test_no_response_requested_placeholder_is_dropped():
    t = Transcript()
    t.prompt("go")
    nrr = t.say("No response requested.")
    nrr["message"]["model"] = "<synthetic>"
    t.prompt("继续")
    t.say("ok")
    out = prune(t.entries)
    assert nrr["uuid"] not in uuids(out)
    assert_chain_ok(out)


def test_model_synthetic_without_flag_is_dropped_too():
    t = Transcript()
    t.prompt("go")
    e = t.synthetic_error()
    del e["isApiErrorMessage"]
    assert uuids(prune(t.entries)) == uuids(t.entries)[:1]


def test_input_is_never_modified():
    t = failed_then_resumed()
    tool_id = t.bash("touch a")
    t.denial(tool_id)
    tool_id = t.bash("touch b")
    t.denial(tool_id)
    tool_id = t.bash("sleep 100")
    t.result(tool_id, "[Request interrupted by user for tool use]", is_error=True)
    t.bash("sleep 200")  # orphan
    before = copy.deepcopy(t.entries)
    prune(t.entries, trim=lambda es: [{**e, "touched": True} for e in es])
    assert t.entries == before


# --- 2. denials ---


def with_denials() -> tuple[Transcript, list[str], list[str]]:
    t = Transcript()
    t.prompt("set things up")
    denied, allowed = [], []
    for n in range(3):
        t.say(f"step {n}", msg_id=f"msg_step{n}")
        tool_id = t.bash(f"touch /work/ws/f{n}", msg_id=f"msg_step{n}")
        t.denial(tool_id, kind="permission-rule" if n == 1 else "user-rejected")
        denied.append(tool_id)
        t.attachment()
        ok = t.call("Read", {"file_path": f"/work/ws/r{n}"})
        t.result(ok, f"contents {n}")
        allowed.append(ok)
    t.say("done")
    return t, denied, allowed


def ids_in(entries):
    uses = {b["id"] for e in entries for b in tool_uses(e)}
    results = {b["tool_use_id"] for e in entries for b in tool_results(e)}
    return uses, results


def test_only_the_latest_denial_is_kept_with_its_call():
    t, denied, allowed = with_denials()
    out = prune(t.entries)
    uses, results = ids_in(out)
    assert denied[-1] in uses and denied[-1] in results
    for old in denied[:-1]:
        assert old not in uses and old not in results  # call and result dropped together
    assert set(allowed) <= uses and set(allowed) <= results
    texts = [
        b["text"]
        for e in out
        if e["type"] == "assistant"
        for b in e["message"]["content"]
        if b["type"] == "text"
    ]
    assert texts == ["step 0", "step 1", "step 2", "done"]  # what the model said stays
    assert len(out) == len(t.entries) - 4
    assert_chain_ok(out)
    assert all_message_entries_on_chain(out)


@pytest.mark.parametrize("keep, expected_kept", [(0, 0), (1, 1), (2, 2), (5, 3)])
def test_keep_denials_counts(keep, expected_kept):
    t, denied, _ = with_denials()
    out = prune(t.entries, keep_denials=keep)
    uses, results = ids_in(out)
    assert [d for d in denied if d in uses] == denied[len(denied) - expected_kept :]
    assert [d for d in denied if d in results] == denied[len(denied) - expected_kept :]
    assert_chain_ok(out)


def test_callback_denial_counts_as_denial():
    t = Transcript()
    t.prompt("go")
    first = t.bash("rm -rf build")
    t.callback_denial(first)
    second = t.bash("rm -rf dist")
    t.callback_denial(second)
    t.say("ok")
    uses, results = ids_in(prune(t.entries))
    assert first not in uses | results
    assert second in uses and second in results


def test_denial_in_a_parallel_call_drops_only_its_blocks():
    t = Transcript()
    t.prompt("go")
    a = t.bash("touch x", msg_id="msg_par")
    b = t.call("Read", {"file_path": "/work/ws/y"}, msg_id="msg_par")
    t.denial(a)
    t.result(b, "y contents")
    c = t.bash("touch z")
    t.denial(c)
    out = prune(t.entries)
    uses, results = ids_in(out)
    assert a not in uses | results
    assert b in uses and b in results
    assert_chain_ok(out)


def test_error_results_that_were_run_are_not_denials():
    t = Transcript()
    t.prompt("go")
    for n in range(3):
        tool_id = t.bash(f"false {n}")
        t.result(tool_id, "Exit code 1", is_error=True)
    assert prune(t.entries) == t.entries


# --- 3. interrupted results ---


@pytest.mark.parametrize(
    "text, extra",
    [
        ("[Request interrupted by user for tool use]", {}),
        ("The user doesn't want to take this action right now. STOP what you are doing.", {}),
        (
            "The user doesn't want to proceed with this tool use. The tool use was rejected.",
            {},
        ),
        ("anything the CLI wrote", {"toolDenialKind": "interrupted"}),
        ("anything the CLI wrote", {"toolDenialKind": "cancelled"}),
    ],
)
def test_interrupted_results_are_neutralised_and_kept(text, extra):
    t = Transcript()
    t.prompt("go")
    tool_id = t.bash("sleep 100")
    entry = t.result(tool_id, text, is_error=True, toolUseResult=text, **extra)
    t.say("stopped")
    out = prune(t.entries)
    assert uuids(out) == uuids(t.entries)
    cleaned = next(e for e in out if e.get("uuid") == entry["uuid"])
    assert result_text(tool_results(cleaned)[0]) == INTERRUPTED_NOTE
    assert cleaned["toolUseResult"] == INTERRUPTED_NOTE
    assert tool_results(cleaned)[0]["is_error"] is True
    assert entry["message"]["content"][0]["content"] == text  # the original is untouched


REAL_INTERRUPT_TEXT = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
    "edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to "
    "tell you how to proceed. Correction to the text above: this call was stopped while running, not "
    "refused before it ran. It may have run in part or in full, and its changes may have been written."
)


def test_tool_stopped_by_interrupt_in_the_real_cli_shape_is_neutralised_not_dropped():
    # What CLI 2.1.327 wrote after ClaudeSDKClient.interrupt() during a slow Bash call.
    t = Transcript()
    t.prompt("run slow")
    first = t.bash("for i in 1 2 3 4 5 6; do sleep 5; done")
    t.result(
        first,
        REAL_INTERRUPT_TEXT,
        is_error=True,
        toolUseResult="User rejected tool use",
        toolDenialKind="user-rejected",
        permissionDecision=None,
    )
    del t.entries[-1]["permissionDecision"]
    t._entry(
        "user",
        message={
            "role": "user",
            "content": [{"type": "text", "text": "[Request interrupted by user for tool use]"}],
        },
    )
    later = t.bash("touch x")
    t.denial(later)
    out = prune(t.entries, keep_denials=0)
    uses, results = ids_in(out)
    assert first in uses and first in results
    assert later not in uses | results
    assert result_of(out, first) == INTERRUPTED_NOTE
    assert "STOP what you are doing" not in json.dumps(out, ensure_ascii=False)
    assert_chain_ok(out)


def test_interrupted_denial_kinds_do_not_count_as_denials():
    t = Transcript()
    t.prompt("go")
    ids = []
    for n in range(3):
        ids.append(t.bash(f"sleep {n}"))
        t.result(
            ids[-1], "[Request interrupted by user for tool use]", is_error=True, toolDenialKind="interrupted"
        )
    uses, results = ids_in(prune(t.entries, keep_denials=0))
    assert set(ids) <= uses and set(ids) <= results


def test_interrupted_text_in_block_list_content():
    t = Transcript()
    t.prompt("go")
    tool_id = t.bash("sleep 9")
    t.result(tool_id, [{"type": "text", "text": "[Request interrupted by user for tool use]"}], is_error=True)
    out = prune(t.entries)
    assert tool_results(out[-1])[0]["content"] == INTERRUPTED_NOTE


# --- 4. glance expiry ---


def glance_session(later_turns: int) -> tuple[Transcript, str, str]:
    t = Transcript()
    t.prompt("work")
    glance = t.bash("git status --short", description="glance: what changed")
    t.result(glance, " M a.py\n" * 50)
    normal = t.bash("pytest -q", description="run the tests")
    t.result(normal, "5 passed")
    for n in range(later_turns - 1):  # the pytest call was already one later turn
        t.say(f"turn {n}")
        t.prompt(f"next {n}")
    return t, glance, normal


def result_of(entries, tool_id):
    return next(result_text(b) for e in entries for b in tool_results(e) if b["tool_use_id"] == tool_id)


def test_glance_results_expire_after_six_turns():
    t, glance, normal = glance_session(later_turns=6)
    out = prune(t.entries)
    assert result_of(out, glance) == EXPIRED_NOTE.format(turns=6)
    assert result_of(out, normal) == "5 passed"
    assert uuids(out) == uuids(t.entries)


def test_glance_results_survive_five_turns_and_ephemeral_off():
    t, glance, _ = glance_session(later_turns=5)
    assert result_of(prune(t.entries), glance).startswith(" M a.py")
    t, glance, _ = glance_session(later_turns=9)
    assert result_of(prune(t.entries, ephemeral=False), glance).startswith(" M a.py")
    assert result_of(prune(t.entries, glance_ttl=20), glance).startswith(" M a.py")


def test_blocks_of_one_response_are_one_turn():
    t = Transcript()
    t.prompt("work")
    glance = t.bash("ls", description="glance: files")
    t.result(glance, "a b c")
    for n in range(6):  # six entries, but one API response
        t.say(f"part {n}", msg_id="msg_same")
    assert result_of(prune(t.entries), glance) == "a b c"


def test_non_bash_or_unmarked_calls_are_not_glances():
    t = Transcript()
    t.prompt("work")
    read = t.call("Read", {"file_path": "/x", "description": "glance: x"})
    t.result(read, "x")
    for n in range(8):
        t.say(f"t{n}")
    assert result_of(prune(t.entries), read) == "x"


# --- 5. missing results ---


def test_orphan_tool_use_at_the_end_gets_a_result():
    t = Transcript()
    t.prompt("go")
    t.say("running a long command", msg_id="msg_x")
    tool_id = t.bash("sleep 600", msg_id="msg_x")
    out = prune(t.entries)
    fill = out[-1]
    assert fill["type"] == "user" and fill["parentUuid"] == t.entries[-1]["uuid"]
    assert tool_results(fill) == [
        {"type": "tool_result", "tool_use_id": tool_id, "content": INTERRUPTED_NOTE, "is_error": True}
    ]
    assert fill["sessionId"] == SID and fill["isSidechain"] is False
    assert fill["sourceToolAssistantUUID"] == t.entries[-1]["uuid"]
    assert fill["uuid"] not in uuids(t.entries)
    assert prune(t.entries)[-1]["uuid"] == fill["uuid"]  # the same uuid on every load
    assert_chain_ok(out)


def test_parallel_orphans_share_one_fill_after_the_last_block_and_children_move_below_it():
    t = Transcript()
    t.prompt("go")
    a = t.bash("sleep 1", msg_id="msg_p")
    b = t.bash("sleep 2", msg_id="msg_p")
    tail = t.entries[-1]
    t.prompt("继续")  # the resumed prompt, parented to the tail
    t.say("ok")
    out = prune(t.entries)
    fill_at = next(i for i, e in enumerate(out) if e.get("type") == "user" and tool_results(e))
    fill = out[fill_at]
    assert out[fill_at - 1]["uuid"] == tail["uuid"]
    assert [r["tool_use_id"] for r in tool_results(fill)] == [a, b]
    resumed = next(e for e in out if (e.get("message") or {}).get("content") == "继续")
    assert resumed["parentUuid"] == fill["uuid"]
    assert_chain_ok(out)
    assert all_message_entries_on_chain(out)


def test_parallel_calls_in_the_real_cli_shape_killed_mid_tool():
    # Observed with CLI 2.1.327: blocks of one response chain one after another, and each
    # tool_result hangs below its own tool_use entry (not below the last block).
    t = Transcript()
    t.prompt("do both")
    quick = t.bash("echo quick", msg_id="msg_1")
    first = t.entries[-1]
    slow = t.bash("for i in 1 2 3; do sleep 5; done", msg_id="msg_1")
    second = t.entries[-1]
    answered = t.result(quick, "quick", parent=first["uuid"])
    out = prune(t.entries)
    fill = next(e for e in out if e.get("uuid") and e["uuid"] not in uuids(t.entries))
    assert [b["tool_use_id"] for b in tool_results(fill)] == [slow]
    assert fill["parentUuid"] == second["uuid"]
    assert out.index(fill) == out.index(second) + 1
    assert next(e for e in out if e.get("uuid") == answered["uuid"])["parentUuid"] == first["uuid"]
    assert_chain_ok(out)


def test_tool_use_answered_later_is_not_an_orphan():
    t = Transcript()
    t.prompt("go")
    tool_id = t.bash("echo hi")
    t.attachment()
    t.result(tool_id, "hi")
    assert prune(t.entries) == t.entries


@pytest.mark.anyio
async def test_entries_appended_below_a_fill_keep_their_parent_on_the_next_load():
    inner = InMemorySessionStore()
    store = PruningSessionStore(inner)
    t = Transcript()
    t.prompt("go")
    t.bash("sleep 600")  # killed here
    await inner.append(KEY, t.entries)

    first = await store.load(KEY)
    leaf = first[-1]["uuid"]
    # The CLI resumes from that leaf and mirrors only its new entries.
    t.last = leaf
    new = [t.prompt("继续"), t.say("done")]
    await store.append(KEY, [e for e in t.entries if e in new or not e.get("uuid")][-4:])

    second = await store.load(KEY)
    assert_chain_ok(second)
    assert all_message_entries_on_chain(second)
    assert chain(second)[0]["uuid"] == new[-1]["uuid"]
    assert chain(second)[-1]["parentUuid"] is None


# --- the store ---


def messy_session() -> Transcript:
    t, _, _ = with_denials()
    t.prompt("now deploy")
    t.api_retry(1)
    t.synthetic_error()
    t.prompt("继续", parent="last")
    t.bash("sleep 1000")  # killed mid-tool
    return t


@pytest.mark.anyio
async def test_store_load_returns_cleaned_copy_and_never_touches_inner_rows():
    inner = InMemorySessionStore()
    store = PruningSessionStore(inner)
    t = messy_session()
    await store.append(KEY, t.entries)
    raw_before = fingerprint(await inner.load(KEY))

    loaded = await store.load(KEY)
    assert loaded == prune(t.entries)
    assert len(loaded) < len(t.entries)
    assert_chain_ok(loaded)
    assert all_message_entries_on_chain(loaded)
    assert fingerprint(await inner.load(KEY)) == raw_before
    loaded.clear()  # a new list: changing it changes nothing stored
    assert fingerprint(await inner.load(KEY)) == raw_before
    assert await store.load({"project_key": "-work-ws", "session_id": "nope"}) is None


@pytest.mark.anyio
async def test_trim_runs_last_and_false_disables_only_trim():
    seen = []

    def trim(entries):
        seen.append(entries)
        return entries[:-1]

    inner = InMemorySessionStore()
    t = messy_session()
    await inner.append(KEY, t.entries)
    trimmed = await PruningSessionStore(inner, trim=trim).load(KEY)
    assert seen[0] == prune(t.entries)  # the hook sees the already cleaned list
    assert trimmed == seen[0][:-1]

    untrimmed = await PruningSessionStore(inner, trim=False).load(KEY)
    assert untrimmed == prune(t.entries)
    assert not any(
        e.get("isApiErrorMessage") for e in untrimmed
    )  # trim=False stops only the trimming: the other cleanups still run


def test_constructor_validates():
    with pytest.raises(ValueError, match="keep_denials"):
        PruningSessionStore(InMemorySessionStore(), keep_denials=-1)
    with pytest.raises(TypeError, match="trim"):
        PruningSessionStore(InMemorySessionStore(), trim=True)


class MinimalStore(SessionStore):
    def __init__(self):
        self.rows = {}

    async def append(self, key, entries):
        self.rows.setdefault(key["session_id"], []).extend(entries)

    async def load(self, key):
        return self.rows.get(key["session_id"])


def _implements(store, method):
    from claude_agent_sdk._internal.session_store_validation import _store_implements

    return _store_implements(store, method)


def test_optional_methods_mirror_the_inner_store():
    full = PruningSessionStore(InMemorySessionStore())
    minimal = PruningSessionStore(MinimalStore())
    for method in ("list_sessions", "list_session_summaries", "delete", "list_subkeys"):
        assert _implements(full, method)
        assert not _implements(minimal, method)
    assert isinstance(full, PruningSessionStore) and isinstance(minimal, PruningSessionStore)
    assert type(full).__name__ == "PruningSessionStore"


@pytest.mark.anyio
async def test_conformance_suite_passes_through_the_wrapper():
    await run_session_store_conformance(lambda: PruningSessionStore(InMemorySessionStore()))


@pytest.mark.anyio
async def test_on_sqlite_store_db_bytes_unchanged(tmp_path):
    from flower.context.store import SQLiteSessionStore

    db = tmp_path / "sessions.db"
    inner = SQLiteSessionStore(db)
    store = PruningSessionStore(inner)
    t = messy_session()
    await store.append(KEY, t.entries)
    inner.close()
    inner = SQLiteSessionStore(db)
    store = PruningSessionStore(inner)

    def digest():
        return hashlib.sha256(db.read_bytes()).hexdigest()

    before = digest()
    loaded = await store.load(KEY)
    assert loaded == prune(t.entries)
    assert_chain_ok(loaded)
    assert await inner.load(KEY) == t.entries  # every row still there, as written
    assert store.has_session(KEY["project_key"], SID)  # other attributes come from inner
    assert [s["session_id"] for s in await store.list_sessions(KEY["project_key"])] == [SID]
    inner.close()
    assert digest() == before


def test_large_session_prunes_in_one_pass():
    t = Transcript()
    t.prompt("long run")
    for n in range(2500):
        tool_id = t.bash(f"touch f{n}") if n % 10 == 0 else t.call("Read", {"file_path": f"/f{n}"})
        if n % 10 == 0:
            t.denial(tool_id)
        else:
            t.result(tool_id, f"content {n}")
        if n % 50 == 0:
            t.api_retry(1)
            t.synthetic_error()
            t.prompt("继续")
    out = prune(t.entries)
    assert_chain_ok(out)
    assert all_message_entries_on_chain(out)
    assert sum(1 for e in out if e.get("toolDenialKind")) == 1


def test_a_call_left_without_result_beside_an_old_denied_call_in_one_entry_is_filled():
    # One assistant entry holding two calls: dropping the denied one changes the entry, and the
    # other, never answered, must still be found and filled.
    t = Transcript()
    t.prompt("go")
    a = t.bash("touch x", msg_id="msg_two")
    orphan = "toolu_never_answered"
    t.entries[-1]["message"]["content"].append(
        {"type": "tool_use", "id": orphan, "name": "Read", "input": {"file_path": "/work/ws/y"}}
    )
    t.denial(a)
    t.denial(t.bash("touch z"))
    t.say("done")
    out = prune(t.entries)
    uses, results = ids_in(out)
    assert a not in uses | results
    assert orphan in uses and orphan in results
    fill = next(e for e in out if any(r["tool_use_id"] == orphan for r in tool_results(e)))
    assert tool_results(fill)[0]["content"] == INTERRUPTED_NOTE
    assert_chain_ok(out)


def test_untouched_entries_come_back_as_the_same_objects():
    # Copy on write, on a long session: only entries prune changes are new dicts.
    t = Transcript()
    t.prompt("long run")
    for n in range(600):
        tool_id = t.bash(f"touch f{n}") if n % 40 == 0 else t.call("Read", {"file_path": f"/f{n}"})
        if n % 40 == 0:
            t.denial(tool_id)
        elif n % 55 == 0:
            t.result(tool_id, "[Request interrupted by user]")
        else:
            t.result(tool_id, f"content {n}")
        if n % 100 == 0:
            t.synthetic_error()
            t.prompt("继续")
    by_uuid = {e["uuid"]: e for e in t.entries if e.get("uuid")}
    out = prune(t.entries)
    same = [e for e in out if e.get("uuid") and e is by_uuid[e["uuid"]]]
    copies = [e for e in out if e.get("uuid") and e is not by_uuid[e["uuid"]]]
    assert all(e != by_uuid[e["uuid"]] for e in copies)  # a copy only where something changed
    assert len(copies) >= 9  # at least the nine interrupted results neutralised
    assert len(same) > 0.9 * len(out)


@pytest.mark.anyio
async def test_load_leaves_the_garbage_collector_as_it_was(tmp_path):
    import gc

    from flower.context.store import SQLiteSessionStore

    inner = SQLiteSessionStore(tmp_path / "sessions.db")
    store = PruningSessionStore(inner)
    t = messy_session()
    await store.append(KEY, t.entries)
    assert gc.isenabled()
    assert await store.load(KEY) == prune(t.entries)
    assert gc.isenabled()
    gc.disable()
    try:
        await store.load(KEY)
        assert not gc.isenabled()
    finally:
        gc.enable()
    inner.close()


# --- on the real CLI ---


async def _run_cli(srv, ws, cfg, store, prompt, resume=None):
    from claude_agent_sdk import ClaudeAgentOptions, ResultError, ResultMessage, query

    options = ClaudeAgentOptions(
        cwd=ws,
        env=srv.env(cfg),
        allowed_tools=["Read"],
        session_store=store,
        session_store_flush="eager",
        resume=resume,
    )
    result = None
    try:
        async for message in query(prompt=prompt, options=options):
            if isinstance(message, ResultMessage):
                result = message
    except ResultError:
        assert result is not None and result.is_error
    return result


@pytest.mark.anyio
async def test_real_cli_transcript_with_denials_and_a_failed_turn_is_cleaned_and_resumes(tmp_path):
    from claude_agent_sdk import project_key_for_directory

    from flower.context.store import SQLiteSessionStore
    from flower.scripted import ScriptedServer
    from tests.rig import message_requests, texts_of

    ws = tmp_path / "ws"
    ws.mkdir()
    touch = "{cwd}/%s.txt"
    scenario = {
        "rules": [
            {"name": "resumed", "last_user_contains": "继续", "reply": [{"text": "continuing"}]},
            {"name": "fail", "last_user_contains": "again please", "error": 500},
            {
                "name": "start",
                "last_user_contains": "make two files",
                "last_is_tool_result": False,
                "reply": [{"tool_use": {"name": "Bash", "input": {"command": "touch " + touch % "a"}}}],
            },
            {
                "name": "after-denial",
                "last_is_tool_result": True,
                "sequence": [
                    {"reply": [{"tool_use": {"name": "Bash", "input": {"command": "touch " + touch % "b"}}}]},
                    {"reply": [{"text": "gave up"}]},
                ],
            },
        ]
    }
    db = tmp_path / "sessions.db"
    inner = SQLiteSessionStore(db)
    store = PruningSessionStore(inner)
    with ScriptedServer(scenario, keep_requests=True) as srv:
        first = await _run_cli(srv, ws, tmp_path / "cfg", store, "make two files")
        sid = first.session_id
        failed = await _run_cli(srv, ws, tmp_path / "cfg", store, "again please", resume=sid)
        assert failed.is_error and "500" in failed.result

        key = {"project_key": project_key_for_directory(str(ws)), "session_id": sid}
        raw = await inner.load(key)
        assert sum(1 for e in raw if e.get("toolDenialKind")) == 2
        assert any(e.get("isApiErrorMessage") for e in raw)
        digest = hashlib.sha256(db.read_bytes()).hexdigest()
        cleaned = await store.load(key)
        assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
        assert await inner.load(key) == raw
        assert sum(1 for e in cleaned if e.get("toolDenialKind")) == 1
        assert "a.txt" not in json.dumps(cleaned) and "b.txt" in json.dumps(cleaned)
        assert "API Error" not in json.dumps(cleaned)
        assert_chain_ok(cleaned)

        resumed = await _run_cli(srv, ws, tmp_path / "cfg", store, "继续", resume=sid)
        assert not resumed.is_error and resumed.result == "continuing" and resumed.session_id == sid
        last = message_requests(srv)[-1]
        assert last["rule"] == "resumed"
    sent = texts_of(last)
    assert "API Error" not in sent and "a.txt" not in sent and "b.txt" in sent
    assert "No response requested" not in sent  # the failed prompt and the resume prompt were merged
    users = [m for m in last["body"]["messages"] if m["role"] == "user"]
    assert "again please" in json.dumps(users[-1], ensure_ascii=False)
    assert not (ws / "a.txt").exists() and not (ws / "b.txt").exists()
    assert_chain_ok(await store.load(key))


@pytest.mark.timeout(10)
def test_a_parent_link_cycle_in_a_corrupt_transcript_ends_the_walk():
    # A transcript comes from a job: hostile input. Two blocks of one response whose
    # parentUuids name each other must not make the search for the response's tail loop forever.
    t = Transcript()
    t.prompt("go")
    t.bash("sleep 1", msg_id="msg_c")
    t.bash("sleep 2", msg_id="msg_c")
    first, second = t.entries[-2], t.entries[-1]
    first["parentUuid"] = second["uuid"]
    out = prune(t.entries)
    answered = [r["tool_use_id"] for e in out for r in tool_results(e)]
    assert sorted(answered) == sorted(b["id"] for e in t.entries for b in tool_uses(e))
    assert chain_problems(t.entries)  # the corruption is still reported, not hidden
