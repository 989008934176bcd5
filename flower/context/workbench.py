"""The workbench: one directory where agents keep scripts, large outputs and notes.

``<workspace>/.flower/`` by default::

    scripts/     reusable scripts the agents wrote
    artifacts/   outputs; anything over 2,000 characters goes here instead of into a reply
    notes/       the brief (需求.md), the goal (目标.md), the Q&A log, handoff documents
    INDEX.md     what is where, one line per file (rebuilt by refresh())

Workflow and Runtime must share one Workbench object — never two assembled paths, which
silently point at different directories. ``os.fspath(wb)`` is the root, so code that takes a
path (the spill hook: ``<workbench>/spill/``) accepts the object itself.
"""

from __future__ import annotations

import os
from pathlib import Path

from flower.catalogue.context import (
    BINARY_FILE,
    EMPTY_FILE,
    INDEX_COUNT,
    INDEX_EMPTY,
    INDEX_HEAD,
    INDEX_MORE,
    WORKBENCH_BLOCK,
    WORKBENCH_COUNTED,
    WORKBENCH_SUBDIRS,
)
from flower.catalogue.names import ARTIFACTS_DIR, INDEX_FILE, NOTES_DIR, SCRIPTS_DIR, WORKBENCH_DIR
from flower.fileio import write_atomic

ARTIFACT_THRESHOLD = 2000
INDEX_LIMIT = 200  # lines of files listed; beyond this INDEX.md only counts them
_DESCRIBE_BYTES = 4096
_SUBDIRS = {sub: what.format(threshold=ARTIFACT_THRESHOLD) for sub, what in WORKBENCH_SUBDIRS.items()}
_COUNTED = WORKBENCH_COUNTED


def notes_dir(workspace: str | os.PathLike[str] = ".") -> Path:
    """``<workspace>/.flower/notes``: the default workbench's notes (the brief, the goal, the
    handoff documents), whether or not a Workbench object exists for it."""
    return Path(workspace).resolve() / WORKBENCH_DIR / NOTES_DIR


class Workbench:
    def __init__(self, workspace: str | os.PathLike[str] = ".", dirname: str = WORKBENCH_DIR) -> None:
        self.workspace = Path(workspace).resolve()
        self.root = (self.workspace / dirname).resolve()
        self.scripts = self.root / SCRIPTS_DIR
        self.artifacts = self.root / ARTIFACTS_DIR
        self.notes = self.root / NOTES_DIR
        self.index = self.root / INDEX_FILE

    def __fspath__(self) -> str:
        return str(self.root)

    def __repr__(self) -> str:
        return f"Workbench({str(self.root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workbench) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    def ensure(self) -> Workbench:
        """Create the directories and INDEX.md if missing. Idempotent; returns self for chaining."""
        for sub in (self.scripts, self.artifacts, self.notes):
            sub.mkdir(parents=True, exist_ok=True)
        self.refresh()
        return self

    def refresh(self) -> Path:
        """Rebuild INDEX.md from what is on disk now. Rewrites the file only when it changed."""
        self.root.mkdir(parents=True, exist_ok=True)
        text = self._render_index()
        try:
            if self.index.read_text(encoding="utf-8") == text:
                return self.index
        except (OSError, UnicodeDecodeError):
            pass
        write_atomic(self.index, text)
        return self.index

    def files(self) -> list[Path]:
        """Files under the workbench (relative paths), sorted; hidden entries and INDEX.md skipped."""
        out: list[Path] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            base = Path(dirpath)
            top = base == self.root
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not (top and d in _COUNTED))
            for name in sorted(filenames):
                if name.startswith(".") or name.endswith(".tmp"):
                    continue
                rel = (base / name).relative_to(self.root)
                if rel != Path(INDEX_FILE):
                    out.append(rel)
        return out

    def _render_index(self) -> str:
        lines = list(INDEX_HEAD)
        for sub, what in _SUBDIRS.items():
            lines.append(f"- `{sub}/` — {what}")
        for sub, what in _COUNTED.items():
            if (self.root / sub).is_dir():
                count = sum(1 for p in (self.root / sub).iterdir() if not p.name.startswith("."))
                lines.append(INDEX_COUNT.format(sub=sub, what=what, count=count))
        lines.append("")
        files = self.files()
        if not files:
            lines.append(INDEX_EMPTY)
        for rel in files[:INDEX_LIMIT]:
            desc = describe(self.root / rel)
            lines.append(f"- `{rel.as_posix()}`" + (f" — {desc}" if desc else ""))
        if len(files) > INDEX_LIMIT:
            lines.append(INDEX_MORE.format(more=len(files) - INDEX_LIMIT))
        return "\n".join(lines) + "\n"

    def prompt_block(self) -> str:
        """The few lines an agent needs: where things are, and where long outputs go."""
        try:
            where = self.root.relative_to(self.workspace).as_posix()
        except ValueError:
            where = str(self.root)
        return WORKBENCH_BLOCK.format(where=where, threshold=ARTIFACT_THRESHOLD)


def describe(path: Path, width: int = 80) -> str:
    """One line about a file: its first heading, docstring or text line; or its size if binary."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_DESCRIBE_BYTES)
        size = path.stat().st_size
    except OSError:
        return ""
    if b"\0" in head:
        return BINARY_FILE.format(size=size)
    text = head.decode("utf-8", errors="ignore")
    for raw in text.splitlines():
        line = raw.strip().lstrip("#").strip().strip("\"'").strip()
        if raw.startswith("#!") or not line or set(line) <= set("-=*`~_"):
            continue
        return line if len(line) <= width else line[: width - 1] + "…"
    return EMPTY_FILE if size == 0 else ""
