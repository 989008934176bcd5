"""Content hashes: of a workspace tree, a file, and canonical JSON."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def json_hash(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(value)).hexdigest()


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def tree_hash(root: Path) -> str:
    """Hash of every entry below `root`: relative path, kind, executable bit, content.

    Paths are walked in sorted order and symlinks are hashed by their target text (never
    followed), so the same tree gives the same hash on any machine and at any location.
    """
    digest = hashlib.sha256()
    for relative, full in _walk(root):
        info = full.lstat()
        if stat.S_ISLNK(info.st_mode):
            entry = f"L {relative} {os.readlink(full)}"
        elif stat.S_ISDIR(info.st_mode):
            entry = f"D {relative}"
        else:
            executable = "x" if info.st_mode & stat.S_IXUSR else "-"
            entry = f"F {relative} {executable} {file_hash(full)}"
        digest.update(entry.encode("utf-8", "surrogateescape") + b"\0")
    return "sha256:" + digest.hexdigest()


def _walk(root: Path) -> list[tuple[str, Path]]:
    entries: list[tuple[str, Path]] = []
    for directory, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(directory)
        for name in sorted([*dirnames, *filenames]):
            full = base / name
            entries.append((full.relative_to(root).as_posix(), full))
    entries.sort(key=lambda item: item[0])
    return entries


def path_hash(path: Path) -> str:
    """tree_hash for a directory, file_hash for a file."""
    return tree_hash(path) if path.is_dir() else file_hash(path)
