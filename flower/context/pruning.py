"""A SessionStore that hands the CLI a cleaned copy of the transcript on resume.

`PruningSessionStore(inner)` passes every call through to `inner` (sessions.db); only `load()`
differs: it returns `prune(rows)`, a cleaned copy. The stored rows are never modified, so the
full record stays in SQLite and every load starts again from it.

What `prune()` does, in order:

1. **Synthetic API errors are dropped**: assistant entries with ``isApiErrorMessage: true`` or
   ``message.model == "<synthetic>"`` ("API Error: Connection refused …", "No response
   requested."), and the CLI's per-retry ``system``/``api_error`` entries. Fed back on resume,
   they make the model believe it was discussing a network problem.
   One exception, found by resuming with the real CLI 2.1.327: when the last user/assistant
   entry is an ``isApiErrorMessage`` entry (the failed turn being resumed), it is kept with its
   text replaced by `CUT_OFF_NOTE`. The CLI never sends such an entry to the API, and with it in place
   it merges the failed prompt and the resume prompt into one user message; without it the leaf
   is a bare user prompt, and the CLI answers that with a synthetic "No response requested." that
   it does send. On the next load it is no longer last and is dropped like the others.
2. **Old denied calls are dropped, call and result together**, keeping the latest
   `keep_denials` (default 1: it stops the model retrying the same blocked command, while a pile
   of denials teaches it not to try allowed things either). A denial is a tool_result entry with
   a ``toolDenialKind`` (the CLI uses "user-rejected", "permission-rule", "automode-*"), or an
   ``is_error`` result whose ``permissionDecision.decision`` is "reject" (a ``can_use_tool``
   deny), unless it is an interrupted result (3).
3. **Interrupted tool results are neutralised**: results with ``toolDenialKind``
   "interrupted"/"cancelled", or starting with the CLI's "The user doesn't want to …" /
   "[Request interrupted by user …" texts without a permission rejection, get
   `INTERRUPTED_NOTE`; the entry stays. The CLI's own text ends with "STOP what you are doing
   and wait for the user", which stalls an unattended resumed run. Note that CLI 2.1.327
   records a tool stopped by ``interrupt()`` as toolDenialKind "user-rejected" with no
   ``permissionDecision``; that is treated as interrupted, not denied.
4. **Glance results expire** (``ephemeral=True``): a *glance* is a Bash call whose
   ``input.description`` starts with "glance:" (a quick look such as ``git status``, whose
   output is stale soon after). Once `glance_ttl` (6) model turns have followed the call, its
   result text becomes a short note. A model turn is one API response (one ``message.id``).
5. **Missing results are filled**: a tool_use with no tool_result anywhere after it (the process
   died mid-tool) gets a user entry with an ``is_error`` tool_result carrying
   `INTERRUPTED_NOTE`, placed right after the last entry of that assistant message, so the API
   never sees an orphan tool_use. Its uuid is derived from that entry's uuid (uuid5), so every
   load produces the same one: entries the CLI appends after a resume are parented to it and
   the next load, which rebuilds it, still finds their parent. (The CLI fills such gaps itself
   on resume with a toolDenialKind "interrupted" result, and persists it; step 3 neutralises
   that one. Filling here keeps the copy valid for any reader, not only that CLI version.)
6. **The parentUuid chain is relinked**: children of a dropped entry are re-parented to the
   nearest surviving ancestor, so the chain from the last entry still reaches the root (the CLI
   rebuilds the conversation by walking that chain; a gap would silently cut off history).
   `chain_problems()` checks this.
7. **trim** (optional, `flower.context.trim.Trimmer`) runs last. ``trim=None``/``False`` disables only that
   layer; steps 1-6 always run.

Entries are copied on write: untouched entries are returned as they came from `inner`,
changed ones are new dicts, the input list and its dicts are never mutated.
"""

from __future__ import annotations

import functools
import uuid as uuidlib
from collections.abc import Callable, Iterable
from typing import Any

from claude_agent_sdk import SessionKey, SessionStore, SessionStoreEntry

from flower.catalogue.context import CUT_OFF_NOTE, INTERRUPTED_NOTE
from flower.context.rows import gc_paused
from flower.errors import ConfigError

Entry = dict[str, Any]
Trim = Callable[[list[Entry]], list[Entry]]

SYNTHETIC_MODEL = "<synthetic>"
INTERRUPT_KINDS = frozenset({"interrupted", "cancelled"})
INTERRUPT_MARKERS = (
    "The user doesn't want to proceed with this tool use",
    "The user doesn't want to take this action right now",
    "[Request interrupted by user",
)
GLANCE_PREFIX = "glance:"
GLANCE_TTL = 6

EXPIRED_NOTE = "[glance output expired after {turns} turns; run the command again if you need it now]"

_FILL_NAMESPACE = uuidlib.UUID("6f1c2a0e-5d7b-4b7e-9a57-f10e2a6b1c00")


# --- entry shapes -----------------------------------------------------------------------------


def _content(entry: Entry) -> Any:
    message = entry.get("message")
    return message.get("content") if isinstance(message, dict) else None


def _blocks(entry: Entry, kind: str) -> list[dict[str, Any]]:
    content = _content(entry)
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def tool_uses(entry: Entry) -> list[dict[str, Any]]:
    """tool_use blocks of an assistant entry."""
    return _blocks(entry, "tool_use") if entry.get("type") == "assistant" else []


def tool_results(entry: Entry) -> list[dict[str, Any]]:
    """tool_result blocks of a user entry."""
    return _blocks(entry, "tool_result") if entry.get("type") == "user" else []


def result_text(block: dict[str, Any]) -> str | None:
    """The text of a tool_result block, or None when it holds anything but text (e.g. images)."""
    content = block.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "\n".join(str(p.get("text", "")) for p in content)
    return None


def is_synthetic_error(entry: Entry) -> bool:
    if entry.get("type") == "assistant":
        message = entry.get("message")
        model = message.get("model") if isinstance(message, dict) else None
        return bool(entry.get("isApiErrorMessage")) or model == SYNTHETIC_MODEL
    return entry.get("type") == "system" and entry.get("subtype") == "api_error"


def _permission_rejected(entry: Entry) -> bool:
    decision = entry.get("permissionDecision")
    return isinstance(decision, dict) and decision.get("decision") == "reject"


def is_interrupted(entry: Entry, block: dict[str, Any]) -> bool:
    """A tool_result for a call stopped while running (or never reached) by an interrupt or a
    dying session. CLI 2.1.327 records an interrupted running tool with toolDenialKind
    "user-rejected" but no permissionDecision, and the text "The user doesn't want to proceed
    with this tool use … stopped while running, not refused"; a refused call carries a
    ``permissionDecision`` of "reject"."""
    if entry.get("toolDenialKind") in INTERRUPT_KINDS:
        return True
    text = result_text(block)
    return (
        text is not None and text.lstrip().startswith(INTERRUPT_MARKERS) and not _permission_rejected(entry)
    )


def is_denial(entry: Entry) -> bool:
    """A tool_result entry for a call that was never run because permission was refused."""
    results = tool_results(entry)
    if not results or any(is_interrupted(entry, b) for b in results):
        return False
    if entry.get("toolDenialKind"):
        return True
    return _permission_rejected(entry) and any(b.get("is_error") for b in results)


def is_glance(tool_use: dict[str, Any]) -> bool:
    """A Bash call the agent marked as a quick look: ``description`` starts with "glance:"."""
    tool_input = tool_use.get("input")
    description = tool_input.get("description") if isinstance(tool_input, dict) else None
    return (
        tool_use.get("name") == "Bash"
        and isinstance(description, str)
        and description.strip().lower().startswith(GLANCE_PREFIX)
    )


def with_result_contents(entry: Entry, replace: dict[str, str]) -> Entry:
    """A copy of `entry` whose tool_results for the ids in `replace` carry the new text."""
    content = [
        {**b, "content": replace[b.get("tool_use_id", "")]}
        if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") in replace
        else b
        for b in _content(entry)
    ]
    return {**entry, "message": {**entry["message"], "content": content}}


def _without_blocks(entry: Entry, kind: str, ids: set[str]) -> Entry | None:
    """A copy of `entry` without the `kind` blocks whose id is in `ids`; None if nothing is left."""
    key = "id" if kind == "tool_use" else "tool_use_id"
    content = _content(entry)
    kept = [b for b in content if not (isinstance(b, dict) and b.get("type") == kind and b.get(key) in ids)]
    if len(kept) == len(content):
        return entry
    if not kept:
        return None
    return {**entry, "message": {**entry["message"], "content": kept}}


# --- the chain --------------------------------------------------------------------------------


def chain(entries: Iterable[Entry]) -> list[Entry]:
    """The parentUuid chain from the last entry that has a uuid back to the root (leaf first)."""
    by_uuid: dict[str, Entry] = {}
    last = None
    for e in entries:
        if e.get("uuid"):
            by_uuid[e["uuid"]] = e
            last = e
    walked: list[Entry] = []
    seen: set[str] = set()
    while last is not None and last["uuid"] not in seen:
        seen.add(last["uuid"])
        walked.append(last)
        last = by_uuid.get(last.get("parentUuid") or "")
    return walked


def chain_problems(entries: list[Entry]) -> list[str]:
    """What breaks the chain invariant; empty when every parentUuid names an earlier entry and the
    walk from the last entry ends at a root (parentUuid null)."""
    problems: list[str] = []
    seen: set[str] = set()
    for i, e in enumerate(entries):
        uid = e.get("uuid")
        if not uid:
            continue
        parent = e.get("parentUuid")
        if parent is not None and parent not in seen:
            problems.append(f"entry {i} ({uid}): parentUuid {parent} is not an earlier entry")
        if uid in seen:
            problems.append(f"entry {i}: duplicate uuid {uid}")
        seen.add(uid)
    walked = chain(entries)
    if walked and walked[-1].get("parentUuid") is not None:
        problems.append(f"the chain from the last entry stops at {walked[-1]['uuid']}, not at a root")
    return problems


# --- prune ------------------------------------------------------------------------------------


class _Scan:
    """What prune needs to know of a transcript, gathered in one pass over it.

    The later steps visit only the entries named here (tool calls, tool results, synthetic
    errors) instead of walking the whole transcript again each: on a long session most entries
    need nothing, and the per-entry checks were most of prune's time.
    """

    __slots__ = ("leaf", "synthetic", "uses", "results", "glances")

    def __init__(self, entries: list[Entry]) -> None:
        # One tight loop with local names: it visits every entry, so it is most of prune's time.
        leaf = -1  # the last user/assistant entry
        synthetic: list[int] = []  # entries is_synthetic_error() holds for
        uses: list[tuple[int, dict[str, Any]]] = []  # (entry index, tool_use block)
        results: list[_Results] = []  # user entries with tool_result blocks
        glance_candidates: list[dict[str, Any]] = []  # Bash calls (is_glance checks only those)
        for i, e in enumerate(entries):
            kind = e.get("type")
            if kind == "assistant":
                leaf = i
                message = e.get("message")
                if isinstance(message, dict):
                    content = message.get("content")
                    if e.get("isApiErrorMessage") or message.get("model") == SYNTHETIC_MODEL:
                        synthetic.append(i)
                    if isinstance(content, list):
                        for b in content:
                            if isinstance(b, dict) and b.get("type") == "tool_use":
                                uses.append((i, b))
                                if b.get("name") == "Bash":
                                    glance_candidates.append(b)
                elif e.get("isApiErrorMessage"):
                    synthetic.append(i)
            elif kind == "user":
                leaf = i
                message = e.get("message")
                content = message.get("content") if isinstance(message, dict) else None
                if isinstance(content, list):
                    blocks = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
                    if blocks:
                        results.append(_Results(i, e, blocks))
            elif kind == "system" and e.get("subtype") == "api_error":
                synthetic.append(i)
        self.leaf = leaf
        self.synthetic = synthetic
        self.uses = uses
        self.results = results
        self.glances = any(is_glance(b) for b in glance_candidates)


class _Results:
    """A user entry's tool_result blocks, which of them were interrupted, and whether the entry is
    a denial (`is_denial`), computed once for the entry as loaded."""

    __slots__ = ("index", "entry", "blocks", "interrupted", "denial")

    def __init__(self, index: int, entry: Entry, blocks: list[dict[str, Any]]) -> None:
        self.index = index
        self.entry = entry
        self.blocks = blocks
        self.interrupted = [is_interrupted(entry, b) for b in blocks]
        self.denial = (
            bool(blocks)
            and not any(self.interrupted)
            and bool(
                entry.get("toolDenialKind")
                or (_permission_rejected(entry) and any(b.get("is_error") for b in blocks))
            )
        )

    def of(self, entries: list[Entry], out: list[Entry | None]) -> _Results | None:
        """These facts for the entry as it is in `out` now: None if dropped, recomputed if changed."""
        entry = out[self.index]
        if entry is None:
            return None
        if entry is entries[self.index]:
            return self
        return _Results(self.index, entry, tool_results(entry))


def prune(
    entries: list[Entry],
    *,
    ephemeral: bool = True,
    keep_denials: int = 1,
    trim: Trim | None = None,
    glance_ttl: int = GLANCE_TTL,
) -> list[Entry]:
    """The cleaned copy described in the module docstring. `entries` is not modified."""
    scan = _Scan(entries)
    out: list[Entry | None] = list(entries)
    dropped: set[str] = set()

    def drop(i: int) -> None:
        entry = out[i]
        if entry is not None and entry.get("uuid"):
            dropped.add(entry["uuid"])
        out[i] = None

    leaf = scan.leaf
    cut_off = leaf >= 0 and bool(entries[leaf].get("isApiErrorMessage"))
    if cut_off:
        out[leaf] = _neutral_placeholder(entries[leaf])
    for i in scan.synthetic:
        if not (cut_off and i == leaf):
            drop(i)

    _drop_old_denials(entries, out, scan, drop, keep_denials)
    _neutralise_results(entries, out, scan, ephemeral, glance_ttl)
    relinked = _relink(out, entries, dropped)
    filled = _fill_missing_results(relinked) if _has_orphan(entries, out, scan) else relinked
    return trim(filled) if trim else filled


def _neutral_placeholder(entry: Entry) -> Entry:
    # Kept (flags intact) only so the CLI sees the failed turn as ended; its error text goes.
    message = entry.get("message") or {}
    return {**entry, "message": {**message, "content": [{"type": "text", "text": CUT_OFF_NOTE}]}}


def _drop_old_denials(
    entries: list[Entry], out: list[Entry | None], scan: _Scan, drop: Callable[[int], None], keep: int
) -> None:
    denied: list[str] = []  # tool_use ids, oldest first
    for r in scan.results:
        now = r.of(entries, out)
        if now is not None and now.denial:
            denied.extend(b.get("tool_use_id", "") for b in now.blocks)
    old = set(denied[: max(len(denied) - keep, 0)])
    if not old:
        return
    # Only entries holding a call or result of an old id change.
    holders = {i for i, b in scan.uses if b.get("id") in old}
    holders.update(r.index for r in scan.results if any(b.get("tool_use_id") in old for b in r.blocks))
    for i in sorted(holders):
        e = out[i]
        if e is None:
            continue
        kind = (
            "tool_use" if e.get("type") == "assistant" else "tool_result" if e.get("type") == "user" else None
        )
        if kind is None or not isinstance(_content(e), list):
            continue
        kept = _without_blocks(e, kind, old)
        if kept is None:
            drop(i)
        else:
            out[i] = kept


def _glance_turns(out: list[Entry | None]) -> tuple[dict[str, int], int]:
    """(glance tool_use id -> the model turn it was called in, the number of turns)."""
    glance_turn: dict[str, int] = {}
    turn, last_message_id = 0, None
    for e in out:
        if e is None or e.get("type") != "assistant":
            continue
        message_id = (e.get("message") or {}).get("id")
        if message_id is None or message_id != last_message_id:
            turn += 1
            last_message_id = message_id
        for block in tool_uses(e):
            if is_glance(block):
                glance_turn[block.get("id", "")] = turn
    return glance_turn, turn


def _neutralise_results(
    entries: list[Entry], out: list[Entry | None], scan: _Scan, ephemeral: bool, ttl: int
) -> None:
    glance_turn, turn = _glance_turns(out) if ephemeral and scan.glances else ({}, 0)
    for r in scan.results:
        now = r.of(entries, out)
        if now is None or now.denial:
            continue
        replace: dict[str, str] = {}
        for block, interrupted in zip(now.blocks, now.interrupted, strict=True):
            tool_use_id = block.get("tool_use_id", "")
            if interrupted:
                replace[tool_use_id] = INTERRUPTED_NOTE
            elif tool_use_id in glance_turn and turn - glance_turn[tool_use_id] >= ttl:
                replace[tool_use_id] = EXPIRED_NOTE.format(turns=turn - glance_turn[tool_use_id])
        if replace:
            changed = with_result_contents(now.entry, replace)
            if isinstance(changed.get("toolUseResult"), str):
                changed["toolUseResult"] = next(iter(replace.values()))
            out[r.index] = changed


def _relink(out: list[Entry | None], original: list[Entry], dropped: set[str]) -> list[Entry]:
    if not dropped:
        return [e for e in out if e is not None]
    # Only dropped entries are walked through; the last entry of a uuid wins, as in a dict of all.
    parent_of = {e["uuid"]: e.get("parentUuid") for e in original if e.get("uuid") in dropped}

    @functools.cache
    def survivor(uid: str | None) -> str | None:
        seen: set[str] = set()
        while uid is not None and uid in dropped and uid not in seen:
            seen.add(uid)
            uid = parent_of.get(uid)
        return uid

    relinked = []
    for e in out:
        if e is None:
            continue
        parent = e.get("parentUuid")
        if parent in dropped:
            e = {**e, "parentUuid": survivor(parent)}
        relinked.append(e)
    return relinked


def _has_orphan(entries: list[Entry], out: list[Entry | None], scan: _Scan) -> bool:
    """Whether a surviving tool_use has no result after it (then `_fill_missing_results` has work).

    Indices into `entries` compare like positions in the relinked list: relinking keeps the order.
    """
    last_result_at: dict[str, int] = {}
    for r in scan.results:
        now = r.of(entries, out)
        if now is not None:
            for b in now.blocks:
                last_result_at[b.get("tool_use_id", "")] = r.index
    changed: set[int] = set()
    for i, block in scan.uses:
        e = out[i]
        if e is None:
            continue
        if e is not entries[i]:
            changed.add(i)
        elif last_result_at.get(block.get("id", ""), -1) <= i:
            return True
    return any(
        last_result_at.get(block.get("id", ""), -1) <= i
        for i in changed
        for block in tool_uses(out[i])  # type: ignore[arg-type]
    )


_SHARED_FIELDS = (
    "isSidechain",
    "agentId",
    "sessionId",
    "cwd",
    "version",
    "gitBranch",
    "userType",
    "entrypoint",
)


def _fill_missing_results(entries: list[Entry]) -> list[Entry]:
    last_result_at: dict[str, int] = {}
    for i, e in enumerate(entries):
        for block in tool_results(e):
            last_result_at[block.get("tool_use_id", "")] = i
    orphans = [
        (i, block)
        for i, e in enumerate(entries)
        for block in tool_uses(e)
        if last_result_at.get(block.get("id", ""), -1) <= i
    ]
    if not orphans:
        return entries

    children: dict[str, list[int]] = {}
    for i, e in enumerate(entries):
        if e.get("parentUuid"):
            children.setdefault(e["parentUuid"], []).append(i)

    def tail_of(i: int) -> int:
        # The last entry of the same API response: its blocks are chained one after another.
        # A transcript comes from a job: a parentUuid cycle (corrupt input) ends the walk.
        message_id = entries[i]["message"].get("id")
        visited = {i}
        while message_id is not None:
            nxt = [
                c
                for c in children.get(entries[i].get("uuid", ""), [])
                if entries[c].get("type") == "assistant"
                and (entries[c].get("message") or {}).get("id") == message_id
                and c not in visited
            ]
            if not nxt:
                break
            i = nxt[0]
            visited.add(i)
        return i

    fills: dict[int, list[tuple[str, str]]] = {}  # tail index -> [(tool_use id, assistant uuid)]
    for i, block in orphans:
        fills.setdefault(tail_of(i), []).append((block.get("id", ""), entries[i].get("uuid", "")))

    # Deterministic uuid: the same fill on every load, so entries the CLI appends below it after
    # a resume still find their parent next time.
    fill_uuid = {t: str(uuidlib.uuid5(_FILL_NAMESPACE, f"fill:{entries[t].get('uuid')}")) for t in fills}
    # What hung below a tail now hangs below its fill.
    moved = {entries[t]["uuid"]: fill_uuid[t] for t in fills if entries[t].get("uuid")}
    result = [
        {**e, "parentUuid": moved[e["parentUuid"]]} if e.get("parentUuid") in moved else e for e in entries
    ]
    final: list[Entry] = []
    for i, e in enumerate(result):
        final.append(e)
        if i in fills:
            final.append(_fill_entry(entries[i], fill_uuid[i], fills[i]))
    return final


def _fill_entry(tail: Entry, uid: str, calls: list[tuple[str, str]]) -> Entry:
    entry: Entry = {"parentUuid": tail.get("uuid")}
    entry.update({k: tail[k] for k in _SHARED_FIELDS if k in tail})
    entry.update(
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_use_id,
                        "content": INTERRUPTED_NOTE,
                        "is_error": True,
                    }
                    for tool_use_id, _ in calls
                ],
            },
            "uuid": uid,
            "timestamp": tail.get("timestamp"),
            "toolUseResult": INTERRUPTED_NOTE,
            "sourceToolAssistantUUID": calls[-1][1],
        }
    )
    return entry


# --- the store --------------------------------------------------------------------------------

_OPTIONAL = ("list_sessions", "list_session_summaries", "delete", "list_subkeys")


def _implements(store: object, method: str) -> bool:
    # The SDK treats an optional method as present only if the class overrides the Protocol's.
    impl = getattr(type(store), method, None)
    return impl is not None and impl is not getattr(SessionStore, method)


def _delegate(name: str) -> Callable[..., Any]:
    async def method(self: PruningSessionStore, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self.inner, name)(*args, **kwargs)

    method.__name__ = method.__qualname__ = name
    return method


@functools.cache
def _variant(base: type, names: frozenset[str]) -> type:
    """`base` plus delegating overrides for exactly the optional methods the inner store has,
    so the SDK's override probe sees the same capabilities as the inner store's."""
    if not names:
        return base
    return type(base.__name__, (base,), {n: _delegate(n) for n in sorted(names)})


class PruningSessionStore(SessionStore):
    """Wraps a SessionStore; `load()` returns `prune()` of the inner rows, the rest passes through.

    Attributes not defined here (e.g. ``close()`` or ``has_session()`` of the SQLite store) are
    looked up on `inner`; note that only `load()` prunes.
    """

    def __new__(cls, inner: SessionStore, *args: Any, **kwargs: Any) -> PruningSessionStore:
        names = frozenset(m for m in _OPTIONAL if _implements(inner, m))
        return super().__new__(_variant(cls, names))

    def __init__(
        self,
        inner: SessionStore,
        *,
        ephemeral: bool = True,
        keep_denials: int = 1,
        trim: Trim | None | bool = None,
        glance_ttl: int = GLANCE_TTL,
    ) -> None:
        if not isinstance(keep_denials, int) or keep_denials < 0:
            raise ConfigError(f"keep_denials must be an integer >= 0, not {keep_denials!r}")
        if trim is True or not (trim is None or trim is False or callable(trim)):
            raise TypeError(
                "trim must be None/False or a callable over the entry list (flower.context.trim.Trimmer)"
            )
        self.inner = inner
        self.ephemeral = ephemeral
        self.keep_denials = keep_denials
        self.trim: Trim | None = trim or None
        self.glance_ttl = glance_ttl

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet: avoid recursing
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        await self.inner.append(key, entries)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        # One pause of the cyclic GC over parse and prune: collecting in between would traverse
        # every freshly parsed entry again (see flower.context.rows).
        with gc_paused():
            rows = await self.inner.load(key)
            if rows is None:
                return None
            cleaned = prune(
                rows,  # type: ignore[arg-type]
                ephemeral=self.ephemeral,
                keep_denials=self.keep_denials,
                trim=self.trim,
                glance_ttl=self.glance_ttl,
            )
        return cleaned  # type: ignore[return-value]
