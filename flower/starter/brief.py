"""需求.md, the requirement brief: four sections, parsed leniently and written back canonically.

The clarify step's model writes the brief in its reply; what goes downstream is the parsed four
sections, never the raw reply (a clarifier likes to paste whole files next to the brief). So:

* fenced code is stripped before parsing (a brief that is *only* a ```markdown block is unwrapped);
* headings match by alias at any level (``## 目标``, ``### Goal``, ``1. 验收标准:``, ``Scope (边界)``);
* a section holding only ``(未填)`` counts as empty, and ``complete`` means all four are filled;
* a section written twice keeps its last non-empty version (models draft, then restate).

Words added later live in appendix sections (``## 唤醒时追加`` for wake words, ``## 运行中补充`` for
text typed during a run), kept verbatim and timestamped; they are part of what the agent must honour.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from flower.catalogue.readback import BRIEF_ALIASES, BRIEF_BLANKS, HEADING_NUMBERING, HEADING_PARENS
from flower.catalogue.starter import BRIEF_HEADER as HEADER
from flower.catalogue.starter import BRIEF_SECTIONS as SECTIONS
from flower.catalogue.starter import EMPTY_MARK as EMPTY
from flower.catalogue.starter import RUN_HEADING, WAKE_HEADING
from flower.errors import ConfigError
from flower.fileio import write_atomic

APPENDICES = (WAKE_HEADING, RUN_HEADING)

ALIASES = BRIEF_ALIASES
_EMPTY_MARKS = BRIEF_BLANKS  # placeholders meaning "not filled in" (see the catalogue)

_FENCE = re.compile(r"^(?P<indent>[ \t]{0,3})(?P<mark>`{3,}|~{3,})(?P<info>[^\n]*)$")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_NUMBERING = re.compile(HEADING_NUMBERING)
_PARENS = re.compile(HEADING_PARENS)


def norm_title(title: str) -> str:
    """Heading text -> comparison key: no numbering, markup, parentheses, punctuation or case."""
    t = title.strip().strip("*_` ").strip()
    t = _NUMBERING.sub("", t)
    t = _PARENS.sub("", t).replace("&", " and ").replace("/", " ")
    t = re.sub(r"[^\w\s]", " ", t.lower())
    return " ".join(t.replace("_", " ").split())


_LOOKUP = {norm_title(alias): key for key, aliases in ALIASES.items() for alias in aliases}
_LOOKUP.update({norm_title(h): h for h in APPENDICES})


def section_of(title: str) -> str | None:
    """The canonical section (or appendix) a heading names, or None."""
    return _LOOKUP.get(norm_title(title))


def strip_fences(text: str) -> str:
    """Remove fenced code blocks (``` or ~~~), fences included; an unclosed fence runs to the end."""
    out, _ = _split_fences(text)
    return out


def _split_fences(text: str) -> tuple[str, list[tuple[str, str]]]:
    """(text without fenced blocks, [(info string, block body)])."""
    kept: list[str] = []
    blocks: list[tuple[str, str]] = []
    fence: str | None = None
    info = ""
    body: list[str] = []
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is None:
            if m:
                fence, info, body = m.group("mark"), m.group("info").strip(), []
            else:
                kept.append(line)
        elif (
            m
            and m.group("mark")[0] == fence[0]
            and len(m.group("mark")) >= len(fence)
            and not m.group("info").strip()
        ):
            blocks.append((info, "\n".join(body)))
            fence = None
        else:
            body.append(line)
    if fence is not None:
        blocks.append((info, "\n".join(body)))
    return "\n".join(kept), blocks


def _is_empty(body: str) -> bool:
    return body.strip().lower() in _EMPTY_MARKS


class Brief(dict[str, Any]):
    """The four sections (canonical names -> text, "" when empty) plus appendix sections.

    A dict, so ``brief["目标"]`` works and it drops into ctx as is; ``appendix`` maps an appendix
    heading (``唤醒时追加`` ...) to its verbatim body.
    """

    def __init__(self, sections: Mapping[str, str] | None = None, appendix: Mapping[str, str] | None = None):
        super().__init__({key: "" for key in SECTIONS})
        for key, value in (sections or {}).items():
            if key not in SECTIONS:
                raise KeyError(f"{key!r} is not a brief section; use one of {', '.join(SECTIONS)}")
            self[key] = "" if _is_empty(value or "") else str(value).strip()
        self.appendix: dict[str, str] = {k: v.strip() for k, v in (appendix or {}).items() if v and v.strip()}

    @property
    def complete(self) -> bool:
        return all(self[key] for key in SECTIONS)

    @property
    def missing(self) -> list[str]:
        return [key for key in SECTIONS if not self[key]]

    def prompt_block(self) -> str:
        """The brief as the next step should see it: the four sections and any added words."""
        return render_brief(self).strip()


def parse_brief(text: str) -> Brief:
    """Parse a brief out of any text (a model's reply or 需求.md). Never raises."""
    body, blocks = _split_fences(text or "")
    sections, appendix = _collect(body)
    if not any(sections.values()):
        # A reply that is nothing but ```markdown <brief>```: read the fenced brief instead.
        for info, block in blocks:
            if info.lower() in ("", "md", "markdown"):
                inner, inner_appendix = _collect(strip_fences(block))
                if any(inner.values()):
                    sections, appendix = inner, inner_appendix
    return Brief(sections, appendix)


def _collect(text: str) -> tuple[dict[str, str], dict[str, str]]:
    sections: dict[str, str] = {}
    appendix: dict[str, str] = {}
    current: str | None = None
    level = 0
    lines: list[str] = []

    def close() -> None:
        if current is None:
            return
        content = "\n".join(lines).strip()
        if current in APPENDICES:
            appendix[current] = (appendix.get(current, "") + "\n" + content).strip()
        elif not _is_empty(content) or current not in sections:
            sections[current] = content  # the last non-empty version wins

    for line in text.splitlines():
        m = HEADING.match(line)
        key = section_of(m.group(2)) if m else None
        if m and (key is not None or len(m.group(1)) <= level or len(m.group(1)) == 1):
            close()
            current, level, lines = key, len(m.group(1)), []
            continue
        if current is not None:
            lines.append(line)
    close()
    return {k: v for k, v in sections.items() if not _is_empty(v)}, appendix


def render_brief(brief: Mapping[str, str]) -> str:
    """需求.md text: header, the four sections in order (empty -> (未填)), then the appendices."""
    parts = [HEADER, ""]
    for key in SECTIONS:
        value = (brief.get(key) or "").strip()
        parts += [f"## {key}", "", value if value and not _is_empty(value) else EMPTY, ""]
    for heading, body in (getattr(brief, "appendix", None) or {}).items():
        parts += [f"## {heading}", "", body.strip(), ""]
    return "\n".join(parts)


def write_brief(
    path: str | os.PathLike[str], brief: Mapping[str, str], *, keep_appendix: bool = True
) -> Path:
    """Write 需求.md atomically (.tmp + replace).

    With `keep_appendix`, appendix sections already in the file (words the person added on wake or
    during the run) are kept when `brief` lacks them: a rewrite never silently drops their words.
    """
    target = Path(path)
    out = Brief({k: brief.get(k, "") for k in SECTIONS}, getattr(brief, "appendix", None))
    if keep_appendix:
        old = read_brief(target)
        for heading, body in (old.appendix if old else {}).items():
            out.appendix.setdefault(heading, body)
    _atomic_write(target, render_brief(out))
    return target


def read_brief(path: str | os.PathLike[str]) -> Brief | None:
    """The brief in `path`, or None when the file does not exist or cannot be read."""
    try:
        return parse_brief(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def append_wake_words(path: str | os.PathLike[str], words: str, *, when: datetime | None = None) -> str:
    """Append `words` under ``## 唤醒时追加``; returns the entry written."""
    return append_to_section(path, WAKE_HEADING, words, when=when)


def append_to_section(
    path: str | os.PathLike[str], heading: str, text: str, *, when: datetime | None = None
) -> str:
    """Append a timestamped bullet at the end of ``## heading`` in a brief file.

    The section is created at the end when missing; a missing file starts as an empty brief.
    Returns the entry (``- [YYYY-mm-dd HH:MM:SS] text``, continuation lines indented).
    """
    words = (text or "").strip()
    if not words:
        raise ConfigError(f"nothing to append under ## {heading}: the text is empty")
    stamp = (when or datetime.now()).strftime("%Y-%m-%d %H:%M:%S")
    first, *rest = words.splitlines()
    entry = "\n".join([f"- [{stamp}] {first}"] + [f"  {line}" if line.strip() else "" for line in rest])
    target = Path(path)
    try:
        current = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = render_brief(Brief())
    _atomic_write(target, _insert_entry(current, heading, entry))
    return entry


def _insert_entry(text: str, heading: str, entry: str) -> str:
    lines = text.rstrip("\n").splitlines()
    start = _find_heading(lines, heading)
    if start is None:
        return "\n".join(lines + ["", f"## {heading}", "", entry]) + "\n"
    end = len(lines)
    in_fence = False
    for i in range(start + 1, len(lines)):
        if _FENCE.match(lines[i]):
            in_fence = not in_fence
        m = None if in_fence else HEADING.match(lines[i])
        if m and len(m.group(1)) <= 2:
            end = i
            break
    body_end = end
    while body_end > start + 1 and not lines[body_end - 1].strip():
        body_end -= 1
    tail = [""] + lines[end:] if end < len(lines) else []
    return "\n".join(lines[:body_end] + ([""] if body_end == start + 1 else []) + [entry] + tail) + "\n"


def _find_heading(lines: Iterable[str], heading: str) -> int | None:
    for i, line in enumerate(lines):
        m = HEADING.match(line)
        if m and section_of(m.group(2)) == heading:
            return i
    return None


def _atomic_write(path: Path, text: str) -> None:
    # A unique temp file: the input thread (amend) and a gate may write 需求.md at once.
    write_atomic(path, text)
