"""The request log's on-disk format (v2): linear in the conversation, not quadratic.

The CLI resends its whole history on every request, so logging every body in full makes a log
grow with the square of the conversation. A v2 entry keeps the request's shape in full and, of
its body, only the messages that are new since the previous request of the same conversation,
with digests proving the earlier part unchanged:

    {"format": "flower-scripted/requests@2", "time", "method", "path", "prefix", "endpoint",
     "session", "nth", "model", "stream", "n_messages", "body_bytes", "rule", "step", "status",
     "outcome", "usage",
     "headers": {...},            absent when listed in "same"
     "body": {...},               the body's fields but `messages`, minus those listed in "same"
     "same": ["headers", "system", "tools"],  equal to the previous request of the conversation
     "messages": {"from": k, "base": D(k), "digest": D(n), "new": [messages k+1..n],
                  "marks": [[i, j, cache_control], ...]},
     "full": "first" | "changed"}  present when the whole history is logged (k = 0)

`D(k)` is the sha256 of the first k messages as JSON (compact, the bytes of `[m1,...,mk`
without cache_control markers), so the writer keeps per conversation only (message count,
their byte length, D, field digests): never the messages themselves. It serialises a request's
messages once and hashes them in one pass, checking the conversations it follows on the way.
The CLI moves `cache_control` markers from block to block as the conversation grows; they
are logged apart (`marks`: message i, block j) so that moving one does not count as a
changed history. A conversation whose history shrank or changed (a handoff,
a trim, a pruning, a session rebuilt on resume) is logged whole, with `"full": "changed"`.
A session may carry several conversations at once (a subagent shares its parent's session):
each is followed as its own branch.

`read_request_log(path)` rebuilds every full request; an unversioned line is a v1 entry (the
body in full) and is read as it is; a newer format is refused with one line (LogFormatError).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .rawprefix import Stable, continue_from, messages_start, stable_of

LOG_FORMAT = "flower-scripted/requests@2"
_FORMAT_STEM = "flower-scripted/requests@"
# Fields smaller than this are logged as they are: naming them "same" would save nothing.
_SAME_MIN_BYTES = 96
MAX_CONVERSATIONS = 4096  # followed at once; an evicted one is logged whole when it comes back
MAX_BRANCHES = 4  # conversations followed per session (a parent and its subagents)
_SLICE = 64  # messages serialised per call


class LogFormatError(ValueError):
    """A request log this reader cannot read (one line naming the file, the line and why)."""


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _field_digest(value: Any) -> tuple[str, int]:
    data = _dumps(value)
    return hashlib.sha256(data).hexdigest()[:32], len(data)


def _hex(hasher: Any) -> str:
    return str(hasher.hexdigest())[:32]


def _start_hash() -> Any:
    return hashlib.sha256(b"[")


EMPTY_DIGEST = _hex(_start_hash())  # D(0)


def _marked(message: Any) -> bool:
    """Whether a content block of `message` carries cache_control (a quick test: most do not)."""
    content = message.get("content") if type(message) is dict else None
    if type(content) is list:
        for block in content:
            if type(block) is dict and "cache_control" in block:
                return True
    return False


def strip_marks(index: int, message: Any, marks: list[list[Any]]) -> Any:
    """`message` without the cache_control of its content blocks (noted in `marks`)."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list) or not any(
        isinstance(b, dict) and "cache_control" in b for b in content
    ):
        return message
    blocks = []
    for j, block in enumerate(content):
        if isinstance(block, dict) and "cache_control" in block:
            marks.append([index, j, block["cache_control"]])
            block = {k: v for k, v in block.items() if k != "cache_control"}
        blocks.append(block)
    return {**message, "content": blocks}


def apply_marks(messages: list[Any], marks: list[list[Any]]) -> list[Any]:
    """The messages with their cache_control markers put back (copies; `messages` is kept as is)."""
    out = list(messages)
    for i, j, value in marks:
        msg = dict(out[i])
        blocks = list(msg["content"])
        blocks[j] = {**blocks[j], "cache_control": value}
        msg["content"] = blocks
        out[i] = msg
    return out


@dataclass
class _Branch:
    count: int = 0  # messages seen so far in this conversation
    size: int = 1  # bytes of `[m1,...,m_count` (1: just "[")
    digest: str = EMPTY_DIGEST  # D(count)
    fields: dict[str, str] = field(default_factory=dict)  # big field -> its digest at the last request
    stable: Stable | None = None  # the last request's raw text, for the fast path (rawprefix.py)
    version: int = 0  # bumped on every update: a fast result computed meanwhile is stale


@dataclass(frozen=True)
class _Candidate:
    """A branch as it was when a request started to be prepared (read under the log's lock)."""

    branch: _Branch
    version: int
    count: int
    digest: str
    size: int
    stable: Stable | None


@dataclass
class _Fast:
    branch: _Branch
    version: int
    digest: str  # D(n)
    size: int
    stable: Stable


@dataclass
class Prepared:
    """A record serialised for hashing (see prepare())."""

    record: dict[str, Any]
    entry: dict[str, Any]  # the record's shape, without headers and body
    key: tuple[str, str, str]  # (prefix, endpoint, session)
    rest: dict[str, Any]  # the body's fields but messages
    stripped: list[Any] | None = None  # the messages without cache_control; None: no messages
    data: bytes = b""  # the stripped messages as compact JSON, `[...]`
    marks: list[list[Any]] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)  # big fields (headers, system, tools) -> digest
    digests: dict[int, str] = field(default_factory=dict)  # prefix size -> D at that size
    text: str | None = None  # the raw body, when the server passed it (the fast path)
    start: int | None = None  # where its first message starts (rawprefix.messages_start)
    first_marked: int = 0  # the first message with a cache_control marker (n: none)
    fast: _Fast | None = None  # the conversation continued, proven from the raw text
    stable: Stable | None = None  # this request's raw text, for the next one (slow path)

    def chunk(self, i: int) -> bytes:
        """Canonical bytes of stripped message i, with its leading separator."""
        assert self.stripped is not None
        return (b"," if i else b"") + _dumps(self.stripped[i])

    def try_fast(self, candidates: list[_Candidate]) -> None:
        """Continue the longest conversation whose raw text this request starts with."""
        if self.stripped is None or self.text is None or self.start is None:
            return
        ordered = sorted(reversed(candidates), key=lambda c: -c.count)
        for cand in ordered:
            if cand.stable is None:
                continue
            found = continue_from(
                self.text,
                self.start,
                self.record["body"]["messages"],
                self.chunk,
                self.first_marked,
                cand.stable,
                cand.count,
                cand.digest,
            )
            if found is None:
                continue
            if any(c is not cand and (c.count, c.digest) == (cand.count, cand.digest) for c in candidates):
                return  # twin conversations: which one the reader takes is the slow path's rule
            self.fast = _Fast(cand.branch, cand.version, *found)
            return

    def serialise(self) -> None:
        """The slow path: all the messages as canonical JSON, and this request's Stable."""
        if self.data or self.stripped is None:
            return
        # In slices: the same bytes as dumping the list whole, without holding the GIL through a
        # whole history (the server's threads answer meanwhile), and without a call per message.
        stripped = self.stripped
        slices = (_dumps(stripped[i : i + _SLICE])[1:-1] for i in range(0, len(stripped), _SLICE))
        self.data = b"[" + b",".join(slices) + b"]"
        if self.text is not None and self.start is not None:
            tail = sum(len(self.chunk(i)) for i in range(self.first_marked, len(stripped)))
            at = len(self.data) - 1 - tail
            self.stable = stable_of(
                self.text,
                self.start,
                self.record["body"]["messages"],
                self.first_marked,
                hashlib.sha256(self.data[:at]),
                at,
            )

    def hash(self, sizes: list[int]) -> None:
        """D at each of `sizes` (prefixes ending on a message boundary) and at the end, in one pass."""
        hasher, done = hashlib.sha256(), 0
        end = len(self.data) - 1  # without the closing "]"
        for size in sorted({*sizes, end}):
            if size > end or size in self.digests or not self._boundary(size):
                continue
            hasher.update(self.data[done:size])
            done = size
            self.digests[size] = _hex(hasher)

    def _boundary(self, size: int) -> bool:
        return size == len(self.data) - 1 or self.data[size : size + 1] == b","


def prepare(record: dict[str, Any], raw: bytes | None = None) -> Prepared:
    """Strip a record's messages of their markers and digest its big fields: no lock needed.
    `raw`, the body as received, lets try_fast() prove the history unchanged cheaply."""
    entry = {k: v for k, v in record.items() if k not in ("headers", "body")}
    entry["format"] = LOG_FORMAT
    body = record.get("body")
    body = body if isinstance(body, dict) else {}
    key = (
        str(record.get("prefix") or ""),
        str(record.get("endpoint") or ""),
        str(record.get("session") or ""),
    )
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return Prepared(record, entry, key, body)
    rest = {k: v for k, v in body.items() if k != "messages"}
    prep = Prepared(record, entry, key, rest)
    prep.stripped = [m if not _marked(m) else strip_marks(i, m, prep.marks) for i, m in enumerate(messages)]
    prep.first_marked = prep.marks[0][0] if prep.marks else len(messages)
    if raw:
        try:
            prep.text = raw.decode("utf-8")
        except UnicodeDecodeError:
            prep.text = None
        prep.start = messages_start(prep.text) if prep.text is not None else None
    for name, value in (("headers", record.get("headers") or {}), *rest.items()):
        found, size = _field_digest(value)
        if size >= _SAME_MIN_BYTES:
            prep.fields[name] = found
    return prep


class DeltaEncoder:
    """Turns full records (log.make_record) into v2 entries. Holds O(conversations) state, bounded.
    Not thread-safe: the log calls it under its lock, in the order the lines are written."""

    def __init__(self, max_conversations: int = MAX_CONVERSATIONS, max_branches: int = MAX_BRANCHES) -> None:
        self.max_conversations = max_conversations
        self.max_branches = max_branches
        self._sessions: OrderedDict[tuple[str, str, str], list[_Branch]] = OrderedDict()
        self.fast_hits = 0  # requests whose history was proven from the raw text (rawprefix.py)

    def conversations(self) -> int:
        return sum(len(b) for b in self._sessions.values())

    def sizes(self, key: tuple[str, str, str]) -> list[int]:
        """The prefix sizes a request of `key` may continue from (hash them before commit())."""
        return [b.size for b in self._sessions.get(key, ())]

    def candidates(self, key: tuple[str, str, str]) -> list[_Candidate]:
        """The conversations a request of `key` may continue (for Prepared.try_fast)."""
        return [
            _Candidate(b, b.version, b.count, b.digest, b.size, b.stable) for b in self._sessions.get(key, ())
        ]

    def encode(self, record: dict[str, Any], raw: bytes | None = None) -> dict[str, Any]:
        prep = prepare(record, raw)
        self.prepare_hashes(prep)
        return self.commit(prep)

    def prepare_hashes(self, prep: Prepared, candidates: list[_Candidate] | None = None) -> None:
        """The costly part: the fast path if it applies, else serialise and hash (no lock needed
        when `candidates` were read under it)."""
        if prep.stripped is None:
            return
        candidates = self.candidates(prep.key) if candidates is None else candidates
        prep.try_fast(candidates)
        if prep.fast is None:
            prep.serialise()
            prep.hash([c.size for c in candidates] if candidates else [])

    def commit(self, prep: Prepared) -> dict[str, Any]:
        """The v2 entry of a prepared record, against (and updating) the conversations followed."""
        record, entry = prep.record, prep.entry
        if prep.stripped is None:
            entry["headers"] = record.get("headers") or {}
            entry["body"] = prep.rest
            return entry
        branches = self._sessions.get(prep.key)
        if branches is not None:
            self._sessions.move_to_end(prep.key)
        fast = prep.fast
        branch = None
        stable: Stable | None
        if fast is not None and branches and fast.branch in branches and fast.branch.version == fast.version:
            branch = fast.branch
            digest, size, stable = fast.digest, fast.size, fast.stable
        else:  # the slow path (or the fast result went stale: another request of it came in between)
            prep.serialise()
            prep.hash(self.sizes(prep.key))
            # The longest conversation it continues; on a tie the latest (as the reader picks).
            for b in sorted(reversed(branches or ()), key=lambda b: -b.count):
                if 0 < b.count <= len(prep.stripped) and prep.digests.get(b.size) == b.digest:
                    branch = b
                    break
            size = len(prep.data) - 1
            digest, stable = prep.digests[size], prep.stable
        start = 0
        if branch is None:
            entry["full"] = "changed" if branches else "first"
            branch = self._new_branch(prep.key)
        else:
            start = branch.count
            assert branches is not None
            branches.remove(branch)
            branches.append(branch)  # most recently continued last
        entry["messages"] = {
            "from": start,
            "base": branch.digest if start else EMPTY_DIGEST,
            "digest": digest,
            "new": prep.stripped[start:],
            **({"marks": prep.marks} if prep.marks else {}),
        }
        same = [name for name, found in prep.fields.items() if start and branch.fields.get(name) == found]
        if "headers" not in same:
            entry["headers"] = record.get("headers") or {}
        entry["body"] = {k: v for k, v in prep.rest.items() if k not in same}
        if same:
            entry["same"] = same
        branch.count, branch.size, branch.digest = len(prep.stripped), size, digest
        branch.fields, branch.stable = prep.fields, stable
        branch.version += 1
        if fast is not None and branch is fast.branch:
            self.fast_hits += 1
        return entry

    def _new_branch(self, key: tuple[str, str, str]) -> _Branch:
        branches = self._sessions.setdefault(key, [])
        self._sessions.move_to_end(key)
        if len(branches) >= self.max_branches:
            branches.pop(0)  # the least recently continued conversation of this session
        branch = _Branch()
        branches.append(branch)
        while len(self._sessions) > self.max_conversations:
            self._sessions.popitem(last=False)
        return branch


@dataclass
class _Rebuilt:
    messages: list[Any]  # stripped of cache_control markers
    hasher: Any  # sha256 over `[m1,...,mn`: D(n), and where the next request's digest goes on from
    fields: dict[str, Any]  # "headers" and the body's other fields, as last logged


class _Rebuilder:
    """The reader's side: per session, the last few conversations rebuilt (the reader may hold them)."""

    def __init__(self, where: str, strict: bool) -> None:
        self.where = where
        self.strict = strict
        self.sessions: dict[tuple[str, str, str], list[_Rebuilt]] = {}

    def record(self, entry: dict[str, Any], lineno: int) -> dict[str, Any]:
        record = {k: v for k, v in entry.items() if k not in ("format", "messages", "same", "full")}
        delta = entry.get("messages")
        if not isinstance(delta, dict):
            record["headers"] = entry.get("headers") or {}
            record["body"] = entry.get("body") or {}
            return record
        key = (
            str(entry.get("prefix") or ""),
            str(entry.get("endpoint") or ""),
            str(entry.get("session") or ""),
        )
        start = int(delta.get("from") or 0)
        if entry.get("full") == "first":  # the writer forgot this session (or never saw it): so do we
            self.sessions.pop(key, None)
        known = self.sessions.setdefault(key, [])
        base: _Rebuilt | None = None
        if start:  # the conversation the writer continued: the latest of exactly `start` messages
            base = next(
                (
                    c
                    for c in reversed(known)
                    if len(c.messages) == start and _hex(c.hasher) == delta.get("base")
                ),
                None,
            )
            if base is None:
                return self._unreadable(record, lineno, f"its first {start} messages are in no earlier line")
        new = list(delta.get("new") or [])
        messages = (base.messages[:start] if base else []) + new
        hasher = base.hasher.copy() if base else _start_hash()
        for i, msg in enumerate(new, start):
            hasher.update(b"," + _dumps(msg) if i else _dumps(msg))
        if _hex(hasher) != delta.get("digest"):
            return self._unreadable(record, lineno, "its messages do not match their digest")
        same = entry.get("same") or []
        fields: dict[str, Any] = {}
        for name in same:
            if base is None or name not in base.fields:
                return self._unreadable(record, lineno, f"its field {name!r} is in no earlier line")
            fields[name] = base.fields[name]
        if "headers" not in same:
            fields["headers"] = entry.get("headers") or {}
        fields.update(entry.get("body") or {})
        conv = _Rebuilt(messages, hasher, fields)
        if base is not None:  # mirrors DeltaEncoder's branches: continued ones move last
            known.remove(base)
        elif len(known) >= MAX_BRANCHES:
            known.pop(0)
        known.append(conv)
        headers = fields["headers"]
        body = {k: v for k, v in fields.items() if k != "headers"}
        body["messages"] = apply_marks(messages, delta.get("marks") or [])
        record["headers"] = headers
        record["body"] = body
        return record

    def _unreadable(self, record: dict[str, Any], lineno: int, why: str) -> dict[str, Any]:
        problem = f"{self.where}: line {lineno}: cannot rebuild the request body: {why} (lines missing?)"
        if self.strict:
            raise LogFormatError(problem)
        record["headers"] = {}
        record["body"] = None
        record["body_problem"] = problem
        return record


def check_format(entry: dict[str, Any], where: str) -> int:
    """The version of one line: 1 (no `format`, the body in full) or 2. Anything else: LogFormatError."""
    fmt = entry.get("format")
    if fmt is None:
        return 1
    if fmt == LOG_FORMAT:
        return 2
    if isinstance(fmt, str) and fmt.startswith(_FORMAT_STEM):
        raise LogFormatError(
            f"{where}: written as {fmt}, newer than this reader ({LOG_FORMAT}): upgrade flower"
        )
    raise LogFormatError(f"{where}: not a request log (format {fmt!r}, expected {LOG_FORMAT})")


def read_request_log(path: str | Path, *, strict: bool = False) -> Iterator[dict[str, Any]]:
    """Every request of a request log (the scripted server's --log, the gateway's gateway.jsonl),
    oldest first, each rebuilt in full: the shape of log.make_record, `body` whole.

    v1 lines (no `format`) are read as they are. A line that cannot be rebuilt (lines missing)
    gets `body` None and `body_problem`, or raises LogFormatError when `strict`. A torn last
    line (a writer died mid-line) is skipped. Records share message objects: treat as read-only.
    """
    path = Path(path)
    rebuild = _Rebuilder(str(path), strict)
    with path.open(encoding="utf-8") as lines:
        for lineno, raw in enumerate(lines, 1):
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            if check_format(entry, f"{path}: line {lineno}") == 1:
                yield entry
                continue
            yield rebuild.record(entry, lineno)
