"""What a job did to its workspace: its copy (`<job>/workspace`) against the task's source.

`summarize` gives counts only (files added/changed/removed, lines +/-): cheap enough for every
job of a report. `diff` adds unified diffs, capped per file and in total, for the viewer. Binary
files (a NUL byte in the first 8 KiB, or not UTF-8) are named, never diffed.

The workspace is the job's model-written code's, so it is read through flower_batch/untrusted_files.py:
symlinks are compared by target and never followed; FIFOs, sockets and devices are listed with a
note and never opened; a tree is walked without recursion and listed up to MAX_FILES entries
(and untrusted_files.MAX_DEPTH levels); what was not listed is in `skipped`. Paths are shown escaped
(`untrusted_files.shown`: bytes that are not UTF-8 as \\xNN, a newline as \\n), so JSON and HTML take them.

A job whose spec has no source (`workspace` None) started from an empty directory: every file
is "added". A source that no longer exists gives `source_missing` and no file list: the job's
copy alone cannot say what changed.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .untrusted_files import Entry, Tree, open_file, read_head, shown, walk
from .workspace_scan import rules_for, scan

FILE_DIFF_LIMIT = 64 * 1024  # characters of unified diff shown per file
TOTAL_DIFF_LIMIT = 1024 * 1024  # characters of unified diff over all files of a job
MAX_FILE_BYTES = 2 * 1024 * 1024  # bigger files are compared, counted as changed, never diffed
MAX_FILES = 20_000  # a tree with more files is listed up to here and flagged truncated
MAX_COMPARE_BYTES = 64 * 1024 * 1024  # bigger files whose mtime changed count as changed, unread
SKIPPED_SHOWN = 20  # entries of `skipped` a summary carries (the count is always whole)
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
    note: str | None = None  # why there is no diff (binary, too big, symlink, fifo, socket, device)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "binary": self.binary,
            "added_lines": self.added_lines,
            "removed_lines": self.removed_lines,
            "diff": self.diff,
            "diff_truncated": self.diff_truncated,
            "note": self.note,
        }


@dataclass
class WorkspaceDiff:
    source: str | None  # the task's source directory (None: the job started empty)
    source_missing: bool = False
    workspace_missing: bool = False
    files: list[FileChange] = field(default_factory=list)
    truncated: bool = False  # the file list or the total diff hit its cap
    skipped: list[dict[str, str]] = field(default_factory=list)  # {"path", "why"}: not listed (too deep, ...)

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
            "source": self.source,
            "available": self.available,
            "source_missing": self.source_missing,
            "workspace_missing": self.workspace_missing,
            "added": self.count("added"),
            "changed": self.count("changed"),
            "removed": self.count("removed"),
            "lines_added": self.added_lines,
            "lines_removed": self.removed_lines,
            "truncated": self.truncated,
            "skipped": self.skipped[:SKIPPED_SHOWN],
            "skipped_count": len(self.skipped),
        }

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary(), "skipped": self.skipped, "files": [f.to_dict() for f in self.files]}


def summarize(source: Path | None, workspace: Path, exclude: Sequence[str] = ()) -> WorkspaceDiff:
    return _compare(source, workspace, with_text=False, exclude=exclude)


def diff(
    source: Path | None,
    workspace: Path,
    *,
    exclude: Sequence[str] = (),
    file_limit: int = FILE_DIFF_LIMIT,
    total_limit: int = TOTAL_DIFF_LIMIT,
) -> WorkspaceDiff:
    return _compare(
        source, workspace, with_text=True, exclude=exclude, file_limit=file_limit, total_limit=total_limit
    )


def _compare(
    source: Path | None,
    workspace: Path,
    *,
    with_text: bool,
    exclude: Sequence[str] = (),
    file_limit: int = FILE_DIFF_LIMIT,
    total_limit: int = TOTAL_DIFF_LIMIT,
) -> WorkspaceDiff:
    """`exclude`: the job's patterns; with the source's .flowerbatchignore and any home in it,
    what its copy left out is not counted as removed (workspace_scan.py)."""
    out = WorkspaceDiff(source=str(source) if source else None)
    if source is not None and not source.is_dir():
        out.source_missing = True
        return out
    if not workspace.is_dir() or workspace.is_symlink():  # a linked workspace would be read elsewhere
        out.workspace_missing = True
        return out
    before = _tree(source, out) if source is not None else Tree()
    if source is not None:
        copied = scan(source, rules_for(source, exclude))
        kept = copied.files.keys() | copied.symlinks.keys()
        before.entries = {rel: e for rel, e in before.entries.items() if rel in kept}
    after = _tree(workspace, out)
    budget = total_limit
    for rel in sorted(before.entries.keys() | after.entries.keys()):
        a, b = _side(source, before, rel), _side(workspace, after, rel)
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


@dataclass(frozen=True)
class _Side:
    root: Path
    entry: Entry


def _side(root: Path | None, tree: Tree, rel: str) -> _Side | None:
    entry = tree.entries.get(rel)
    return _Side(root, entry) if root is not None and entry is not None else None


def _tree(root: Path, out: WorkspaceDiff) -> Tree:
    """Every file, symlink and special file under root, none followed (untrusted_files.walk); what was
    not listed goes to out.skipped, a cut listing to out.truncated."""
    try:
        tree = walk(root, max_entries=MAX_FILES)
    except OSError as exc:
        out.skipped.append({"path": shown(str(root)), "why": f"unreadable ({exc.strerror or exc})"})
        return Tree()
    side = "source" if out.source == str(root) else "workspace"
    out.skipped += [{"path": shown(rel), "why": f"{why} ({side})"} for rel, why in tree.skipped]
    out.truncated = out.truncated or tree.truncated
    return tree


def _same(a: _Side, b: _Side) -> bool:
    ea, eb = a.entry, b.entry
    if ea.kind != "file" or eb.kind != "file":
        return ea.kind == eb.kind and ea.target == eb.target  # symlinks by target; a FIFO is a FIFO
    if ea.size != eb.size:
        return False
    if ea.mtime_ns == eb.mtime_ns:
        # rsync's quick check: the runner's copy keeps each file's mtime (copytree/copy2) and a
        # write changes it, so equal size and mtime mean untouched without reading either file.
        return True
    if ea.size > MAX_COMPARE_BYTES:
        return False  # reading two huge files costs more than calling them changed
    try:
        with open_file(a.root, ea.rel) as fa, open_file(b.root, eb.rel) as fb:
            while True:
                ca, cb = fa.read(1 << 16), fb.read(1 << 16)
                if ca != cb:
                    return False
                if not ca:
                    return True
    except OSError:
        return False


def _lines(side: _Side | None) -> tuple[list[str] | None, str | None]:
    """The file's text lines, or (None, why) for binary, oversized, unreadable or special files."""
    if side is None:
        return [], None
    entry = side.entry
    if entry.kind == "symlink":
        return None, f"symlink -> {shown(entry.target or '?')}"
    if entry.kind != "file":
        return None, f"{entry.kind}, not read"
    if entry.size > MAX_FILE_BYTES:
        return None, "too big to diff"
    try:
        read = read_head(side.root, entry.rel, MAX_FILE_BYTES)
    except OSError as exc:
        return None, f"unreadable: {exc.strerror or exc}"
    if read.cut:
        return None, "too big to diff"
    if b"\0" in read.data[:_SNIFF]:
        return None, "binary"
    try:
        return read.data.decode("utf-8").splitlines(keepends=True), None
    except UnicodeDecodeError:
        return None, "binary"


def _change(rel: str, kind: str, a: _Side | None, b: _Side | None, with_text: bool, limit: int) -> FileChange:
    old, why_a = _lines(a)
    new, why_b = _lines(b)
    name = shown(rel)
    change = FileChange(name, kind)
    if old is None or new is None:
        change.note = why_a or why_b
        change.binary = "binary" in (why_a, why_b)
        return change
    lines = list(difflib.unified_diff(old, new, f"a/{name}", f"b/{name}", n=3))
    change.added_lines = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
    change.removed_lines = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
    if with_text:
        text = "".join(ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n" for ln in lines)
        if len(text) > limit:
            text, change.diff_truncated = text[:limit], True
        change.diff = text
    return change
