"""Handoff: when a session's context is nearly full, it writes a handoff document and a fresh
session takes over (upstream's "handoff").

Not compaction: the document is a file a person can read and edit, and what was left out is
visible. Continuity needs no extra wiring: lineage always records the last session a step
handed over to, so the next wake continues the successor.

The numbers (upstream's):

* only the main thread's context counts: input + cache-read + cache-creation tokens of its
  latest model call (subagents have their own windows);
* ``room = max(50_000, 25% of window)``, ``at = max(10_000, window - room)``: past ``at`` after a
  model call, the runtime interrupts the turn at the next message boundary, asks the session
  for the document, then starts the successor seeded with it;
* a warning event at ``max(1_000, at - 20_000)``;
* an overflow error ("prompt is too long", the CLI's ``blocking_limit``) means the session
  can no longer write anything: the runtime writes a *degraded* document from what it knows
  and hands over anyway;
* at most 8 successors per `Runtime.run` (a step whose every successor overflows at once
  would otherwise loop);
* the CLI's own auto-compact is switched off while handoff is on (``DISABLE_AUTO_COMPACT=1``,
  read by CLI 2.1.327 together with the ``autoCompactEnabled`` setting): a silent compaction
  would both hide what was dropped and reset the numbers the threshold watches.

The document lives at ``<notes>/交接-<step>.md`` with sections 现在在做什么 / 已经定下的 /
走不通的路 / 下一步 / 现场 (the first and 下一步 are required).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from flower.catalogue.context import (
    DEGRADED_DOC,
    DEGRADED_NO_CALLS,
    DEGRADED_NOTHING_SAID,
    DEGRADED_PREVIOUS,
    HANDOFF_SEE_DOC,
    HANDOFF_TITLE,
    TRUNCATED,
)
from flower.catalogue.context import HANDOFF_REQUIRED as REQUIRED
from flower.catalogue.context import HANDOFF_SECTIONS as SECTIONS
from flower.catalogue.context import HANDOFF_SEED_PROMPT as SEED_PROMPT
from flower.catalogue.context import HANDOFF_WRITE_PROMPT as WRITE_PROMPT
from flower.catalogue.names import HANDOFF_FILE
from flower.catalogue.readback import HANDOFF_NUMBERING
from flower.errors import ConfigError
from flower.fileio import write_atomic

DEFAULT_WINDOW = 200_000
MAX_GENERATIONS = 8

# Tokens of the window counted as "full". Overflow texts the CLI and the API produce.
_OVERFLOW = re.compile(r"prompt is too long|prompt_too_long|context (?:length|window) exceeded", re.I)
_OVERFLOW_REASONS = frozenset({"prompt_too_long", "blocking_limit"})


@dataclass
class Handoff:
    """Handoff policy for a Runtime. ``Runtime(handoff=True|False|Handoff(window=...))``."""

    enabled: bool = True
    window: int = DEFAULT_WINDOW
    max_generations: int = MAX_GENERATIONS
    notes_dir: str | os.PathLike[str] | None = None
    """Where 交接-<step>.md goes; default the runtime's workbench notes or <workspace>/.flower/notes."""

    def __post_init__(self) -> None:
        if not isinstance(self.window, int) or self.window <= 0:
            raise ConfigError(f"Handoff.window must be a positive number of tokens, not {self.window!r}")
        if not isinstance(self.max_generations, int) or self.max_generations < 0:
            raise ConfigError(f"Handoff.max_generations must be an int >= 0, not {self.max_generations!r}")

    @classmethod
    def from_value(cls, value: bool | Handoff | None) -> Handoff:
        if isinstance(value, Handoff):
            return value
        if value is None or isinstance(value, bool):
            return cls(enabled=bool(value))
        raise TypeError(f"handoff must be True, False or a Handoff, not {type(value).__name__}")

    @property
    def room(self) -> int:
        return max(50_000, self.window // 4)

    @property
    def at(self) -> int:
        return max(10_000, self.window - self.room)

    @property
    def warn_at(self) -> int:
        return max(1_000, self.at - 20_000)

    def due(self, context: int) -> bool:
        return self.enabled and context >= self.at

    def cli_env(self) -> dict[str, str]:
        """Auto-compact off while handoff is on (see the module docstring)."""
        return {"DISABLE_AUTO_COMPACT": "1"} if self.enabled else {}


def is_overflow(error: str | None, terminal_reason: str | None = None) -> bool:
    """True for "the context no longer fits" failures, which only a handoff can get past."""
    return terminal_reason in _OVERFLOW_REASONS or bool(_OVERFLOW.search(error or ""))


def doc_path(notes_dir: str | os.PathLike[str], step: str, pattern: str = HANDOFF_FILE) -> Path:
    """``<notes>/交接-<step>.md`` (or another `pattern`: the time-up notes' 收尾-<step>.md);
    attempt suffixes (#retry1, ·判定#2) are not part of the name."""
    base = re.split(r"[#·]", step, maxsplit=1)[0] or step
    safe = re.sub(r"[\\/:*?\"<>|\s]+", "-", base).strip("-") or "step"
    return Path(notes_dir) / pattern.format(step=safe)


def missing_sections(text: str) -> list[str]:
    """Required sections that are absent or empty in a handoff document."""
    found = _sections(text)
    return [name for name in REQUIRED if not found.get(name, "").strip()]


def _sections(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    current: str | None = None
    for line in (text or "").splitlines():
        m = re.match(r"^#{1,6}\s*(.+?)\s*#*\s*$", line)
        if m:
            title = re.sub(HANDOFF_NUMBERING, "", m.group(1)).strip()
            current = title if title in SECTIONS else None
            if current is not None:
                out.setdefault(current, "")
            continue
        if current is not None:
            out[current] += line + "\n"
    return out


def normalise(text: str, step: str) -> str:
    """The session's reply as a document: code fences around the whole reply removed, a title added."""
    body = (text or "").strip()
    fenced = re.fullmatch(r"```[a-zA-Z]*\n(.*)\n```", body, re.S)
    if fenced:
        body = fenced.group(1).strip()
    if not body.startswith("# "):
        body = HANDOFF_TITLE.format(step=step) + body
    return body + "\n"


def degraded_doc(
    *,
    step: str,
    task: str,
    last_text: str,
    tool_calls: list[dict[str, Any]],
    error: str,
    previous: str = "",
    template: str = DEGRADED_DOC,
) -> str:
    """What the runtime can write itself when the session can no longer answer (overflow), or
    wrote no notes when its time was up (`template` WRAP_UP_DEGRADED_DOC)."""
    recent = tool_calls[-15:]
    calls = (
        "\n".join(f"- {c.get('name')}: {_short(c.get('input'), 160)}" for c in recent) or DEGRADED_NO_CALLS
    )
    # The previous document, capped: degraded documents must not grow generation after generation.
    earlier = DEGRADED_PREVIOUS.format(doc=_short_block(previous, 4000)) if previous.strip() else ""
    return template.format(
        step=step,
        error=_short(error, 120),
        last_words=_quote(last_text) or DEGRADED_NOTHING_SAID,
        task=_quote(task),
        calls=calls,
        earlier=earlier,
        written=datetime.now(),
    )


def seed_prompt(path: Path, doc: str, task: str) -> str:
    return SEED_PROMPT.format(path=path, doc=doc.strip(), task=task.strip() or HANDOFF_SEE_DOC)


def write_prompt(path: Path) -> str:
    return WRITE_PROMPT.format(path=path)


def save(path: Path, text: str) -> Path:
    """Write the document atomically (a reader never sees half a file)."""
    write_atomic(path, text)
    return path


def _quote(text: str) -> str:
    text = (text or "").strip()
    if len(text) > 1500:
        text = text[:1500] + " …"
    return "\n".join("> " + line for line in text.splitlines())


def _short_block(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + TRUNCATED


def _short(value: object, limit: int) -> str:
    text = str(value if value is not None else "").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
