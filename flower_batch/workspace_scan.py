"""What a job's workspace copy holds: the source folder scanned once, bounded, by the same rules
for the content hash (jobmodel/hashing.py), the pre-flight's size check and the copy itself
(running/workspace_copy.py).

Left out of a workspace (`Scan.left_out`, by the user's choice):
- a flower-batch home: any folder holding HOME_MARK (every home gets one when a run takes its
  lease), and the `leave_out` folders given (the home of this command): `run .` with the default
  `./volumes` never copies the earlier jobs into the new one;
- what `.flowerbatchignore` at the workspace's root names, and the job's `exclude` patterns:
  one pattern a line, `#` comments; a pattern with a `/` (other than a trailing one) matches the
  path from the root, else any name at any depth; a trailing `/` matches directories only.

Skipped (`Scan.skipped`, named to the person): FIFOs, sockets and devices (never opened), a
symlink whose target leaves the workspace (an absolute target, or `..` past the root), and what
cannot be read. Symlinks are never followed; one that stays inside is kept as a symlink.

Bounded: at most `max_entries` entries and `max_depth` levels (`Scan.cut` says where it stopped).
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from flower_batch.untrusted_files import kind_of, shown

HOME_MARK = ".flower-batch-home"
IGNORE_FILE = ".flowerbatchignore"
IGNORE_FILE_LIMIT = 64 * 1024  # bytes of .flowerbatchignore read
DEFAULT_LIMIT_BYTES = 200 * 1024 * 1024  # a workspace copy larger than this is refused unless allowed
MAX_ENTRIES = 50_000
MAX_DEPTH = 64


@dataclass(frozen=True)
class Rules:
    """What a scan leaves out: patterns (the ignore file's and the job's), and absolute folders."""

    patterns: tuple[str, ...] = ()
    leave_out: tuple[Path, ...] = ()

    def excluded(self, rel: str, is_dir: bool) -> str | None:
        """The pattern that leaves `rel` out, or None."""
        name = rel.rsplit("/", 1)[-1]
        for pattern in self.patterns:
            dir_only = pattern.endswith("/")
            bare = pattern.strip("/")
            if dir_only and not is_dir:
                continue
            anchored = "/" in pattern.rstrip("/")
            if fnmatch.fnmatchcase(rel if anchored else name, bare):
                return pattern
        return None


def ignore_patterns(text: str) -> tuple[str, ...]:
    """The patterns of an ignore file's text."""
    lines = (line.strip() for line in text.splitlines())
    return tuple(line for line in lines if line and not line.startswith("#"))


def rules_for(root: Path, exclude: Sequence[str] = (), leave_out: Iterable[Path] = ()) -> Rules:
    """The rules of the workspace at `root`: its .flowerbatchignore (if a regular file), then
    `exclude`; `leave_out`: folders (a home) left out wherever they are."""
    patterns: tuple[str, ...] = ()
    ignore = root / IGNORE_FILE
    try:
        if stat.S_ISREG(os.lstat(ignore).st_mode):
            with open(ignore, "rb") as f:
                patterns = ignore_patterns(f.read(IGNORE_FILE_LIMIT).decode("utf-8", "replace"))
    except OSError:
        patterns = ()
    return Rules((*patterns, *exclude), tuple(p.resolve() for p in leave_out))


@dataclass
class Scan:
    """One scan of a workspace. Paths are '/'-separated below the root."""

    root: Path
    files: dict[str, int] = field(default_factory=dict)  # rel -> size
    symlinks: dict[str, str] = field(default_factory=dict)  # rel -> target (inside the workspace)
    dirs: list[str] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (rel, why): the user's rules
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (rel, why): not copyable
    cut: str | None = None  # where the bounds stopped the scan

    @property
    def total_bytes(self) -> int:
        return sum(self.files.values())

    @property
    def entries(self) -> int:
        return len(self.files) + len(self.symlinks) + len(self.dirs)

    def largest(self, n: int = 3) -> list[tuple[str, int]]:
        """The top-level names holding the most bytes (a folder's files summed), largest first."""
        sizes: dict[str, int] = {}
        for rel, size in self.files.items():
            top = rel.split("/", 1)[0] + ("/" if "/" in rel else "")
            sizes[top] = sizes.get(top, 0) + size
        return sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))[:n]

    def skipped_line(self, n: int = 3) -> str | None:
        """The skipped entries in one line: the first `n` named, the rest counted."""
        if not self.skipped:
            return None
        named = "; ".join(f"{shown(rel)} ({why})" for rel, why in self.skipped[:n])
        more = len(self.skipped) - n
        return named + (f"; and {more} more" if more > 0 else "")


def _symlink_escapes(rel: str, target: str) -> bool:
    if target.startswith("/"):
        return True
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    return joined == ".." or joined.startswith("../")


def scan(
    root: Path, rules: Rules | None = None, *, max_entries: int = MAX_ENTRIES, max_depth: int = MAX_DEPTH
) -> Scan:
    """Scan `root` by `rules`, depth first, iteratively (module docstring)."""
    rules = rules or Rules()
    root = root.resolve()  # below it, paths are real: no symlink is ever descended into
    found = Scan(root)
    stack: list[tuple[str, int]] = [("", 0)]  # (rel of a directory, its depth)
    while stack:
        rel_dir, depth = stack.pop()
        try:
            with os.scandir(root / rel_dir if rel_dir else root) as it:
                names = sorted((e.name, e) for e in it)
        except OSError as exc:
            found.skipped.append((rel_dir or ".", f"unreadable: {exc.strerror or exc}"))
            continue
        for name, entry in reversed(names):
            if found.entries >= max_entries:
                found.cut = f"more than {max_entries:,} entries"
                return found
            rel = f"{rel_dir}/{name}" if rel_dir else name
            descend = _visit(found, rules, rel, entry, depth, max_depth)
            if descend:
                stack.append((rel, depth + 1))
    found.dirs.sort()
    found.skipped.sort()
    found.left_out.sort()
    return found


def _visit(found: Scan, rules: Rules, rel: str, entry: os.DirEntry[str], depth: int, max_depth: int) -> bool:
    """Record one entry; True for a directory to descend into."""
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError as exc:
        found.skipped.append((rel, f"unreadable: {exc.strerror or exc}"))
        return False
    kind = kind_of(st.st_mode)
    is_dir = kind == "directory"
    pattern = rules.excluded(rel, is_dir)
    if pattern is not None:
        found.left_out.append((rel, f"excluded by {pattern!r}"))
        return False
    if is_dir:
        if _is_home(Path(entry.path), rules):
            found.left_out.append((rel, "a flower-batch home"))
            return False
        if depth + 1 >= max_depth:
            found.cut = found.cut or f"{shown(rel)}: deeper than {max_depth} levels"
            found.skipped.append((rel, f"deeper than {max_depth} levels"))
            return False
        found.dirs.append(rel)
        return True
    if kind == "file":
        found.files[rel] = st.st_size
    elif kind == "symlink":
        target = os.readlink(entry.path)
        if _symlink_escapes(rel, target):
            found.skipped.append((rel, f"symlink -> {target}: points out of the workspace"))
        else:
            found.symlinks[rel] = target
    else:
        found.skipped.append((rel, kind))
    return False


def _is_home(path: Path, rules: Rules) -> bool:
    if os.path.lexists(path / HOME_MARK):
        return True
    return path in rules.leave_out


def mark_home(root: Path) -> None:
    """Mark `root` as a flower-batch home: any workspace scan that meets it leaves it out."""
    root.mkdir(parents=True, exist_ok=True)
    mark = root / HOME_MARK
    if not os.path.lexists(mark):
        mark.write_text("a flower-batch home: left out of every job's workspace copy\n", encoding="utf-8")
