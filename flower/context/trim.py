"""Large tool results out of the resident context, content kept on disk ("context layers").

Two layers share one pointer format and content-addressed files (``<sha16>.txt``, the first 16
hex digits of the SHA-256 of the text), so the same text is written once and nothing is lost:

* **spill** (`spill()`, for a PostToolUse hook): a fresh result over 4,000 chars goes to
  ``<workbench>/spill/<sha16>.txt``; the agent sees a pointer plus the first 400 chars.
* **trim on load** (`Trimmer`, the ``trim`` hook of `flower.context.pruning.PruningSessionStore`):
  when a session is resumed, tool results of >= 2,000 chars except the newest 20 are written
  under the trim directory and replaced, in the loaded copy only, by a pointer. The stored
  transcript keeps the full text; each load trims again from it.

A pointer reads ``[trimmed: N chars → /abs/path.txt; first 400 chars: …]`` (``spilled`` for
spill). Results that are not plain text (e.g. images) are left alone. Only the tool_result
``content`` the model sees is replaced; the entry's ``toolUseResult`` (what the CLI shows, not
what it sends) is kept.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from flower.context.pruning import Entry, result_text, tool_results, with_result_contents
from flower.fileio import write_atomic

TRIM_MIN_CHARS = 2000
TRIM_KEEP_NEWEST = 20
SPILL_THRESHOLD = 4000
HEAD_CHARS = 400
_POINTER_PREFIXES = ("[trimmed: ", "[spilled: ")


def _sha16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def store_text(directory: Path, text: str) -> Path:
    """Write `text` to ``directory/<sha16>.txt`` (atomically, once) and return the path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{_sha16(text)}.txt"
    data = text.encode("utf-8")
    if path.exists() and path.stat().st_size == len(data):
        return path
    write_atomic(path, data)
    return path


def pointer(verb: str, text: str, path: Path, head: int = HEAD_CHARS) -> str:
    return f"[{verb}: {len(text)} chars → {path}; first {head} chars: {text[:head]}]"


def is_pointer(text: str) -> bool:
    return text.startswith(_POINTER_PREFIXES)


def spill(
    text: str, workbench: str | Path, *, threshold: int = SPILL_THRESHOLD, head: int = HEAD_CHARS
) -> str | None:
    """For a PostToolUse hook: if `text` is over `threshold` chars, save it to
    ``<workbench>/spill/<sha16>.txt`` and return the pointer to show instead; else None."""
    if len(text) <= threshold or is_pointer(text):
        return None
    path = store_text(Path(workbench).resolve() / "spill", text)
    return pointer("spilled", text, path, head)


class Trimmer:
    """Trim on load: ``Trimmer(dir)(entries)`` returns a copy with old large results as pointers.

    Idempotent: a pointer is short and recognised, so trimming a trimmed list changes nothing.
    The input list and its entries are not modified.
    """

    def __init__(
        self,
        dir: str | Path,
        min_chars: int = TRIM_MIN_CHARS,
        keep_newest: int = TRIM_KEEP_NEWEST,
        head: int = HEAD_CHARS,
    ) -> None:
        self.dir = Path(dir).resolve()
        self.min_chars = min_chars
        self.keep_newest = keep_newest
        self.head = head

    def __repr__(self) -> str:
        return f"Trimmer({str(self.dir)!r}, min_chars={self.min_chars}, keep_newest={self.keep_newest})"

    def _large(self, block: dict[str, Any]) -> str | None:
        text = result_text(block)
        if text is None or len(text) < self.min_chars or is_pointer(text):
            return None
        return text

    def __call__(self, entries: list[Entry]) -> list[Entry]:
        large = [
            (i, block.get("tool_use_id", ""), text)
            for i, e in enumerate(entries)
            for block in tool_results(e)
            if (text := self._large(block)) is not None
        ]
        old = large[: max(len(large) - self.keep_newest, 0)]
        if not old:
            return entries
        replace: dict[int, dict[str, str]] = {}
        for i, tool_use_id, text in old:
            path = store_text(self.dir, text)
            replace.setdefault(i, {})[tool_use_id] = pointer("trimmed", text, path, self.head)
        return [with_result_contents(e, replace[i]) if i in replace else e for i, e in enumerate(entries)]
