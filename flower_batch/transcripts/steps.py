"""A job's trajectory: its manifest rows (steps) with the messages of their sessions.

Each manifest row is one step attempt (`干活`, `干活#round2`, `干活·判定#1`, ...). Rows that share a
session (a not_yet round resumes the work session) split its transcript by time: an entry goes
to the latest row that started at or before it. A row's `retired` sessions are the ones a
handoff replaced: they come first, then the handoff document, then the successor. Subagent
transcripts (`<session>/subagents/agent-*`) hang under the Agent tool call that launched them.
Sessions in the db that no manifest row names yet belong to the step still running.

Everything returned is plain data for JSON; the page escapes it when it renders.

The files are the job's, written by its model-written code: each is read through
flower_batch/untrusted_files.py (no symlink followed, the runs and workspace folders themselves included;
regular files only; a byte cap), and what was not read is said in `problem` or the handoff's
`problem`, never replaced by what a symlink points at.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from flower.catalogue.names import JUDGE_SUFFIX, MANIFEST_FILE, NOTES_DIR, SESSIONS_DB, WORKBENCH_DIR
from flower.context.handoff import doc_path

from ..untrusted_files import Read, read_head
from .sessions import SessionsUnreadable, Transcripts, read_transcripts, session_of, subpath_of

TEXT_LIMIT = 200_000  # characters kept of any one message or tool result
HANDOFF_LIMIT = 50_000
MANIFEST_BYTES = 16 * 1024 * 1024  # a bigger manifest.json is not parsed (and the page says so)
_JUDGE = re.compile(re.escape(JUDGE_SUFFIX) + r"#(\d+)$")
_ROUND = re.compile(r"#round(\d+)$")
_RETRY = re.compile(r"#retry(\d+)$")


def step_kind(name: str) -> dict[str, Any]:
    """What a step name says about the attempt: judge round N, work round N, retry N, or plain."""
    for kind, pattern in (("judge", _JUDGE), ("round", _ROUND), ("retry", _RETRY)):
        m = pattern.search(name)
        if m:
            return {"kind": kind, "number": int(m.group(1)), "base": name[: m.start()]}
    return {"kind": "step", "number": None, "base": name}


@dataclass
class RowSession:
    """One session of a manifest row: its main-thread entries (the row's share of a session that
    several rows resumed) and every transcript of the session (subagents under their subpath)."""

    session_id: str
    role: str  # "retired" (a handoff replaced it) or "current"
    entries: list[dict[str, Any]]
    subs: Mapping[str | None, list[dict[str, Any]]]


@dataclass
class JobTranscripts:
    """A job's manifest rows with its transcripts, split so each entry belongs to one row."""

    rows: list[dict[str, Any]]
    by_session: dict[str, dict[str | None, list[dict[str, Any]]]]
    problems: list[str]
    owners: dict[str, list[tuple[datetime | None, int]]]  # session id -> [(row start, row index)]

    def sessions(self, index: int) -> list[RowSession]:
        """The sessions of row `index`: retired ones (a handoff's predecessors) first."""
        row = self.rows[index]
        retired = [s for s in row.get("retired") or [] if isinstance(s, str)]
        out = []
        for sid in _sessions_of(row):
            subs = self.by_session.get(sid, {})
            main = [e for e in subs.get(None, []) if _belongs(e, index, self.owners.get(sid, []))]
            out.append(RowSession(sid, "retired" if sid in retired else "current", main, subs))
        return out

    def unlisted(self) -> list[RowSession]:
        """Sessions in the db that no row names yet: the step still running (or killed)."""
        named = {sid for row in self.rows for sid in _sessions_of(row)}
        return [
            RowSession(sid, "current", subs.get(None, []), subs)
            for sid, subs in self.by_session.items()
            if sid not in named and subs.get(None)
        ]


def load_job(runs: Path) -> JobTranscripts:
    """The manifest and sessions.db of the job whose run_dir is `runs`, read bounded; what could
    not be read is said in `problems`."""
    rows, problems = _manifest(runs)
    try:
        transcripts = read_transcripts(runs / SESSIONS_DB)
        problems += transcripts.notes
    except SessionsUnreadable as exc:
        transcripts = Transcripts()
        problems.append(f"{SESSIONS_DB} is not readable right now ({exc}); the page retries")
    by_session: dict[str, dict[str | None, list[dict[str, Any]]]] = {}
    for key, entries in transcripts.by_key.items():
        by_session.setdefault(session_of(key), {})[subpath_of(key)] = entries
    return JobTranscripts(rows, by_session, problems, _owners(rows))


def handoff_doc(workspace: Path, step: str) -> dict[str, Any]:
    """The handoff document of `step` (workspace-relative path, text clipped, or why unread)."""
    rel = f"{WORKBENCH_DIR}/{NOTES_DIR}/{doc_path('.', step).name}"
    text, problem = _read_text(workspace, rel, HANDOFF_LIMIT)
    return {"doc": rel, "text": text, "problem": problem}


def job_trajectory(runs: Path, workspace: Path) -> dict[str, Any]:
    """Steps of the job whose run_dir is `runs`, each with its messages, tokens and handoffs."""
    job = load_job(runs)
    steps = [_step(i, job, workspace) for i in range(len(job.rows))]
    running = [
        {
            "session_id": s.session_id,
            "messages": _messages(s.entries, s.subs),
            "tokens": _tokens(s.entries),
        }
        for s in job.unlisted()
    ]
    return {"steps": steps, "unlisted_sessions": running, "problem": "; ".join(job.problems) or None}


def read_in(folder: Path, rel: str, limit: int) -> Read:
    """At most `limit` bytes of folder/rel, reached through no symlink, `folder` itself included."""
    return read_head(folder.parent, f"{folder.name}/{rel}", limit)


def _manifest(runs: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The manifest's rows, and what kept them from being read (absent is no problem: not run yet)."""
    try:
        read = read_in(runs, MANIFEST_FILE, MANIFEST_BYTES)
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        return [], [f"{MANIFEST_FILE}: {exc}"]
    if read.cut:
        return [], [f"{MANIFEST_FILE} is {read.size} bytes, over the viewer's {MANIFEST_BYTES}: not shown"]
    try:
        rows = json.loads(read.data)
    except ValueError:
        return [], []  # being written: the next poll reads it whole
    return ([r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []), []


def _sessions_of(row: Mapping[str, Any]) -> list[str]:
    retired = [s for s in row.get("retired") or [] if isinstance(s, str) and s]
    sid = row.get("session_id")
    return [*retired, *([sid] if isinstance(sid, str) and sid else [])]


def _owners(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[datetime | None, int]]]:
    """session id -> [(row start, row index)], for splitting shared sessions by time."""
    owners: dict[str, list[tuple[datetime | None, int]]] = {}
    for i, row in enumerate(rows):
        for sid in _sessions_of(row):
            owners.setdefault(sid, []).append((_when(row.get("started_at")), i))
    return owners


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _belongs(entry: Mapping[str, Any], index: int, owners: list[tuple[datetime | None, int]]) -> bool:
    if len(owners) == 1:
        return True
    ts = _when(entry.get("timestamp"))
    if ts is None:
        return False
    starts = [(start, i) for start, i in owners if start is not None and start <= ts]
    chosen = max(starts, key=lambda s: s[0])[1] if starts else min(i for _, i in owners)
    return chosen == index


def _step(index: int, job: JobTranscripts, workspace: Path) -> dict[str, Any]:
    row, rows = job.rows[index], job.rows
    name = str(row.get("step") or "?")
    sessions: list[dict[str, Any]] = []
    for found in job.sessions(index):
        messages = _messages(found.entries, found.subs)
        sessions.append(
            {
                "session_id": found.session_id,
                "role": found.role,
                "messages": messages,
                "tokens": _tokens(found.entries),
                # Only the subagents this step's own calls launched: a shared session's other rounds keep theirs.
                "subagent_tokens": _sum_tokens(
                    [m["subagent"]["tokens"] for m in messages if m.get("subagent")]
                ),
            }
        )
    retired = [s for s in row.get("retired") or [] if isinstance(s, str)]
    handoff = {**handoff_doc(workspace, name), "generations": len(retired)} if retired else None
    tokens = _sum_tokens([s["tokens"] for s in sessions] + [s["subagent_tokens"] for s in sessions])
    return {
        "index": index,
        "name": name,
        **step_kind(name),
        "run": row.get("run"),
        "ok": bool(row.get("ok")),
        "error": row.get("error"),
        "errors": [str(e) for e in row.get("errors") or []],
        "cost_usd": row.get("cost_usd"),
        "num_turns": row.get("num_turns"),
        "duration_s": row.get("duration_s"),
        "started_at": row.get("started_at"),
        "ended_at": row.get("ended_at"),
        "attempts": row.get("attempts"),
        "resumed": bool(row.get("resumed")),
        "model": row.get("model"),
        "context": row.get("context"),
        "text": _clip(str(row.get("text") or "")),
        "tokens": tokens,
        "sessions": sessions,
        "handoff": handoff,
        "resumes_step": _earlier_with_session(index, row, rows),
    }


def _earlier_with_session(
    index: int, row: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
) -> str | None:
    sid = row.get("session_id")
    for earlier in reversed(rows[:index]):
        if sid and earlier.get("session_id") == sid:
            return str(earlier.get("step"))
    return None


def _read_text(folder: Path, rel: str, limit: int) -> tuple[str | None, str | None]:
    """(text clipped to `limit` characters, None), or (None, why it was not read)."""
    try:
        read = read_in(folder, rel, limit * 4)  # a character is at most 4 bytes
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, str(exc)
    return _clip(read.data.decode("utf-8", "replace"), limit), None


def _clip(text: str, limit: int = TEXT_LIMIT) -> str:
    return (
        text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters not shown)"
    )


# -- messages ----------------------------------------------------------------------------------


def _messages(
    entries: Sequence[Mapping[str, Any]], subs: Mapping[str | None, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The readable messages of one transcript: user text, assistant text/thinking, tool calls with
    their results (paired by tool_use id), subagent transcripts under their Agent call."""
    agents = _subagents_by_tool_use(subs)
    out: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    call: dict[str, Any] | None
    for entry in entries:
        kind = entry.get("type")
        message = entry.get("message")
        if kind not in ("user", "assistant") or not isinstance(message, dict) or entry.get("isMeta"):
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            continue
        for block in blocks:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text" and str(block.get("text") or "").strip():
                out.append({"kind": kind, "text": _clip(str(block["text"])), "at": entry.get("timestamp")})
            elif btype == "thinking" and block.get("thinking"):
                out.append(
                    {"kind": "thinking", "text": _clip(str(block["thinking"])), "at": entry.get("timestamp")}
                )
            elif btype == "tool_use":
                call = {
                    "kind": "tool_use",
                    "id": block.get("id"),
                    "name": str(block.get("name") or "?"),
                    "input": _clip(json.dumps(block.get("input"), ensure_ascii=False, indent=2)),
                    "result": None,
                    "at": entry.get("timestamp"),
                }
                agent = agents.get(str(block.get("id")))
                if agent is not None:
                    call["subagent"] = agent
                calls[str(block.get("id"))] = call
                out.append(call)
            elif btype == "tool_result":
                result = {
                    "text": _clip(result_text(block.get("content"))),
                    "is_error": bool(block.get("is_error")),
                }
                call = calls.get(str(block.get("tool_use_id")))
                if call is not None and call["result"] is None:
                    call["result"] = result
                else:
                    out.append({"kind": "tool_result", "tool_use_id": block.get("tool_use_id"), **result})
    return out


def result_text(content: Any) -> str:
    """A tool result's content as text: text blocks joined, other blocks named."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for item in content:
            if isinstance(item, dict) and item.get("type") == "text":
                parts.append(str(item.get("text") or ""))
            elif isinstance(item, dict):
                parts.append(f"[{item.get('type', 'block')}]")
        return "\n".join(parts)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _subagents_by_tool_use(subs: Mapping[str | None, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for key, entries in subs.items():
        if not key:
            continue
        meta: dict[str, Any] = {}
        for e in entries:
            if e.get("type") == "agent_metadata":
                meta.update(e)
        tool_use = meta.get("toolUseId")
        found[str(tool_use) if tool_use else key] = {
            "key": key,
            "agent_type": meta.get("agentType"),
            "description": meta.get("description"),
            "finished": bool(meta.get("finished")),
            "messages": _messages(entries, {}),
            "tokens": _tokens(entries),
        }
    return found


# -- tokens ------------------------------------------------------------------------------------

_TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def _tokens(entries: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Usage summed over model calls. The CLI writes one entry per content block of a response,
    each with the same usage: a response (message id) counts once."""
    seen: set[str] = set()
    total = dict.fromkeys(_TOKEN_FIELDS, 0)
    total["calls"] = 0
    for entry in entries:
        message = entry.get("message")
        if entry.get("type") != "assistant" or not isinstance(message, dict):
            continue
        usage = message.get("usage")
        mid = str(message.get("id") or entry.get("uuid"))
        if not isinstance(usage, dict) or mid in seen or message.get("model") == "<synthetic>":
            continue
        seen.add(mid)
        total["calls"] += 1
        for f in _TOKEN_FIELDS:
            value = usage.get(f)
            total[f] += value if isinstance(value, int) else 0
    return total


def _sum_tokens(parts: Sequence[Mapping[str, int]]) -> dict[str, int]:
    keys = (*_TOKEN_FIELDS, "calls")
    return {k: sum(p.get(k, 0) for p in parts) for k in keys}
