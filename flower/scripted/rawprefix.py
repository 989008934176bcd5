"""The request log's fast path: prove a conversation's earlier messages unchanged from the raw
request body, without serialising them again.

logformat.py's digest D(k) is over the canonical JSON of the first k messages; computing it
for a whole history costs a full serialisation (about 5 ms a MB). But the CLI sends the same
bytes for the same messages, up to the first one carrying a cache_control marker (markers
move every request). So, of each request, remember the raw text of its messages up to that
one (`Stable`: how many, how long, its sha256, and the canonical hasher at that point). The
next request of the conversation whose raw text starts with the same bytes has the same first
`count` messages (identical JSON text parses to identical values): D of them is the saved
hasher, and only the messages after them are serialised. The messages after are read from the
raw text too and compared with the parsed ones, the array must end where the parsed one does,
and the body must hold no second `messages` key: so the raw array is the one parsed. Any doubt: None, and the
caller takes the slow path (serialise everything), which is always right.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_DECODER = json.JSONDecoder()
_SPACE = json.decoder.WHITESPACE  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Stable:
    """A request's messages up to its first marked one, as raw text and as canonical digest."""

    count: int  # messages before the first one with a cache_control marker
    length: int  # characters of raw text from the first message to the end of message count-1
    digest: str  # sha256 of that text (utf-8)
    hasher: Any  # the canonical sha256 state after `[m1,...,m_count` (never updated: copied)
    size: int  # bytes of `[m1,...,m_count` in canonical JSON


def _skip(text: str, pos: int) -> int:
    return int(_SPACE.match(text, pos).end())


def messages_start(text: str) -> int | None:
    """Where the first message of the top-level `messages` array starts in a raw body, or None."""
    try:
        pos = _skip(text, 0)
        if text[pos : pos + 1] != "{":
            return None
        pos += 1
        while True:
            pos = _skip(text, pos)
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _skip(text, pos)
            if text[pos : pos + 1] != ":":
                return None
            pos = _skip(text, pos + 1)
            if key == "messages":
                return _skip(text, pos + 1) if text[pos : pos + 1] == "[" else None
            _, pos = _DECODER.raw_decode(text, pos)  # a field before messages (the model): small
            pos = _skip(text, pos)
            if text[pos : pos + 1] != ",":
                return None
            pos += 1
    except (ValueError, TypeError):
        return None


def _walk(text: str, pos: int, messages: list[Any], first: int) -> list[int] | None:
    """The end offsets of messages[first:] read from the raw text at `pos` (just after message
    first-1, or the array's start), each equal to the parsed one; None unless the array then ends."""
    ends = []
    try:
        for i in range(first, len(messages)):
            pos = _skip(text, pos)
            if i:
                if text[pos : pos + 1] != ",":
                    return None
                pos = _skip(text, pos + 1)
            value, pos = _DECODER.raw_decode(text, pos)
            if value != messages[i]:
                return None
            ends.append(pos)
        pos = _skip(text, pos)
        if text[pos : pos + 1] != "]" or not _no_other_messages(text, pos + 1):
            return None
        return ends
    except (ValueError, TypeError):
        return None


def _no_other_messages(text: str, pos: int) -> bool:
    """Whether the top-level object ends after `pos` without a second `messages` key (a parser
    keeps the last of duplicate keys: then the array read here is not the one parsed)."""
    while True:
        pos = _skip(text, pos)
        if text[pos : pos + 1] == "}":
            return True
        if text[pos : pos + 1] != ",":
            return False
        key, pos = _DECODER.raw_decode(text, _skip(text, pos + 1))
        if key == "messages":
            return False
        pos = _skip(text, pos)
        if text[pos : pos + 1] != ":":
            return False
        _, pos = _DECODER.raw_decode(text, _skip(text, pos + 1))  # system, tools, ...: tens of KB


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def continue_from(
    text: str,
    start: int,
    messages: list[Any],
    chunk: Callable[[int], bytes],
    first_marked: int,
    stable: Stable,
    count: int,
    digest: str,
) -> tuple[str, int, Stable] | None:
    """(D(n), its size, this request's Stable) if the first `stable.count` messages of this
    request are the remembered raw text and its first `count` messages digest to `digest` (the
    conversation's last request); else None.

    `start`: messages_start(text). `chunk(i)`: the canonical bytes of stripped message i with
    its leading separator. `first_marked`: the index of the first message with a marker (n if none).
    """
    j, n = stable.count, len(messages)
    if not 0 < j <= count <= n or first_marked < j:
        return None
    end = start + stable.length
    raw = hashlib.sha256(_encoded(text[start:end]))
    if raw.hexdigest() != stable.digest:
        return None
    ends = _walk(text, end, messages, j)
    if ends is None:
        return None
    hasher, size = stable.hasher.copy(), stable.size
    at_marked: tuple[Any, int] | None = None
    for i in range(j, n + 1):
        if i == count and hasher.hexdigest()[:32] != digest:
            return None
        if i == first_marked:
            at_marked = (hasher.copy(), size)
        if i < n:
            data = chunk(i)
            hasher.update(data)
            size += len(data)
    assert at_marked is not None
    length = (ends[first_marked - 1 - j] if first_marked > j else end) - start
    raw.update(_encoded(text[end : start + length]))
    return (
        hasher.hexdigest()[:32],
        size,
        Stable(first_marked, length, raw.hexdigest(), at_marked[0], at_marked[1]),
    )


def stable_of(
    text: str, start: int, messages: list[Any], first_marked: int, hasher: Any, size: int
) -> Stable | None:
    """This request's Stable, reading the whole raw array (the slow path's first request of a
    conversation). `hasher`, `size`: the canonical state after `[m1,...,m_first_marked`."""
    ends = _walk(text, start, messages, 0)
    if ends is None:
        return None
    length = (ends[first_marked - 1] if first_marked else start) - start
    return Stable(
        first_marked, length, hashlib.sha256(_encoded(text[start : start + length])).hexdigest(), hasher, size
    )
