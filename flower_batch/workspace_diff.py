"""What a job did to its workspace: its copy (`<job>/workspace`) against the task's source.

`summarize` gives counts only (files added/changed/removed, lines +/-): cheap enough for every
job of a report. `diff` adds unified diffs, capped per file and in total, for the viewer. Binary
files (a NUL byte in the first 8 KiB, or not UTF-8) are named, never diffed. Symlinks are compared
by target and never followed, so a job's workspace cannot point the reader outside it.

A job whose spec has no source (`workspace` None) started from an empty directory: every file
is "added". A source that no longer exists gives `source_missing` and no file list: the job's
copy alone cannot say what changed.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FILE_DIFF_LIMIT = 64 * 1024  # characters of unified diff shown per file
TOTAL_DIFF_LIMIT = 1024 * 1024  # characters of unified diff over all files of a job
MAX_FILE_BYTES = 2 * 1024 * 1024  # bigger files are compared, counted as changed, never diffed
MAX_FILES = 20_000  # a tree with more files is listed up to here and flagged truncated
_SNIFF = 8192


@dataclass
class FileChange:
    path: str  # relative, '/'-separated
    kind: str  # added | changed | removed
    binary: bool = False
    added_lines: int = 0
    removed_lines: int = 0
    diff: str | None = None  # unified diff text (None: binary, too big, or not asked for)
    diff_truncated: bool = False
    note: str | None = None  # why there is no diff (binary, too big, symlink)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "kind": self.kind, "binary": self.binary,
            "added_lines": self.added_lines, "removed_lines": self.removed_lines,
            "diff": self.diff, "diff_truncated": self.diff_truncated, "note": self.note,
        }


@dataclass
class WorkspaceDiff:
    source: str | None  # the task's source directory (None: the job started empty)
    source_missing: bool = False
    workspace_missing: bool = False
    files: list[FileChange] = field(default_factory=list)
    truncated: bool = False  # the file list or the total diff hit its cap

    def count(self, kind: str) -> int:
        return sum(1 for f in self.files if f.kind == kind)

    @property
    def added_lines(self) -> int:
        return sum(f.added_lines for f in self.files)

    @property
    def removed_lines(self) -> int:
        return sum(f.removed_lines for f in self.files)

    @property
    def available(self) -> bool:
        return not (self.source_missing or self.workspace_missing)

    def summary(self) -> dict[str, Any]:
        """Counts only: what results.json and the report carry."""
        return {
            "source": self.source, "available": self.available,
            "source_missing": self.source_missing, "workspace_missing": self.workspace_missing,
            "added": self.count("added"), "changed": self.count("changed"), "removed": self.count("removed"),
            "lines_added": self.added_lines, "lines_removed": self.removed_lines, "truncated": self.truncated,
        }

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary(), "files": [f.to_dict() for f in self.files]}


def summarize(source: Path | None, workspace: Path) -> WorkspaceDiff:
    return _compare(source, workspace, with_text=False)


def diff(
    source: Path | None, workspace: Path, *, file_limit: int = FILE_DIFF_LIMIT, total_limit: int = TOTAL_DIFF_LIMIT
) -> WorkspaceDiff:
    return _compare(source, workspace, with_text=True, file_limit=file_limit, total_limit=total_limit)


def source_of(spec: dict[str, Any]) -> Path | None:
    """The source directory a record's spec names (None: the job started from an empty workspace)."""
    value = spec.get("workspace")
    return Path(value) if isinstance(value, str) and value else None


def _compare(
    source: Path | None, workspace: Path, *, with_text: bool,
    file_limit: int = FILE_DIFF_LIMIT, total_limit: int = TOTAL_DIFF_LIMIT,
) -> WorkspaceDiff:
    out = WorkspaceDiff(source=str(source) if source else None)
    if source is not None and not source.is_dir():
        out.source_missing = True
        return out
    if not workspace.is_dir():
        out.workspace_missing = True
        return out
    before, cut_a = _tree(source) if source is not None else ({}, False)
    after, cut_b = _tree(workspace)
    out.truncated = cut_a or cut_b
    budget = total_limit
    for rel in sorted(before.keys() | after.keys()):
        a, b = before.get(rel), after.get(rel)
        if a is not None and b is not None and _same(a, b):
            continue
        kind = "added" if a is None else "removed" if b is None else "changed"
        change = _change(rel, kind, a, b, with_text, min(file_limit, max(budget, 0)))
        if change.diff is not None:
            budget -= len(change.diff)
            if budget <= 0:
                out.truncated = True
        out.files.append(change)
    return out


def _tree(root: Path) -> tuple[dict[str, Path], bool]:
    """Relative path -> path of every file and symlink under root (symlinks never followed)."""
    found: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        dirnames.sort()
        # A symlink to a directory shows up in dirnames; os.walk does not descend into it.
        for name in [d for d in dirnames if (base / d).is_symlink()] + sorted(filenames):
            path = base / name
            found[path.relative_to(root).as_posix()] = path
            if len(found) >= MAX_FILES:
                return found, True
    return found, False


def _same(a: Path, b: Path) -> bool:
    if a.is_symlink() or b.is_symlink():
        return a.is_symlink() and b.is_symlink() and os.readlink(a) == os.readlink(b)
    try:
        sa, sb = a.stat(), b.stat()
        if sa.st_size != sb.st_size:
            return False
        if sa.st_mtime_ns == sb.st_mtime_ns:
            # rsync's quick check: the runner's copy keeps each file's mtime (copytree/copy2) and a
            # write changes it, so equal size and mtime mean untouched without reading either file.
            return True
        with a.open("rb") as fa, b.open("rb") as fb:
            while True:
                ca, cb = fa.read(1 << 16), fb.read(1 << 16)
                if ca != cb:
                    return False
                if not ca:
                    return True
    except OSError:
        return False


def _lines(path: Path | None) -> tuple[list[str] | None, str | None]:
    """The file's text lines, or (None, why) for binary, oversized or unreadable files."""
    if path is None:
        return [], None
    if path.is_symlink():
        return None, f"symlink -> {os.readlink(path)}"
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None, "too big to diff"
        raw = path.read_bytes()
    except OSError as exc:
        return None, f"unreadable: {exc.strerror or exc}"
    if b"\0" in raw[:_SNIFF]:
        return None, "binary"
    try:
        return raw.decode("utf-8").splitlines(keepends=True), None
    except UnicodeDecodeError:
        return None, "binary"


def _change(rel: str, kind: str, a: Path | None, b: Path | None, with_text: bool, limit: int) -> FileChange:
    old, why_a = _lines(a)
    new, why_b = _lines(b)
    change = FileChange(rel, kind)
    if old is None or new is None:
        change.note = why_a or why_b
        change.binary = "binary" in (why_a, why_b)
        return change
    lines = list(difflib.unified_diff(old, new, f"a/{rel}", f"b/{rel}", n=3))
    change.added_lines = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
    change.removed_lines = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
    if with_text:
        text = "".join(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n" for ln in lines)
        if len(text) > limit:
            text, change.diff_truncated = text[:limit], True
        change.diff = text
    return change
