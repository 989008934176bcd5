"""Content hashes: of a workspace tree, a file, and canonical JSON."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from flower_batch.workspace_scan import Rules, scan

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


def tree_hash(root: Path, rules: Rules | None = None) -> str:
    """Hash of what a copy of `root` holds (workspace_scan.py: the same rules, the same bounds):
    relative path, kind, executable bit, content.

    Paths are in sorted order and symlinks are hashed by their target text (never followed), so
    the same tree gives the same hash on any machine and at any location. What a copy leaves out
    (a home inside it, ignored paths, FIFOs) changes nothing.
    """
    found = scan(root, rules or Rules())
    entries = [(rel, "D") for rel in found.dirs]
    entries += [(rel, "F") for rel in found.files]
    entries += [(rel, "L") for rel in found.symlinks]
    digest = hashlib.sha256()
    for relative, kind in sorted(entries):
        if kind == "L":
            entry = f"L {relative} {found.symlinks[relative]}"
        elif kind == "D":
            entry = f"D {relative}"
        else:
            entry = _file_entry(found.root, relative)
        digest.update(entry.encode("utf-8", "surrogateescape") + b"\0")
    if found.cut:
        digest.update(f"cut {found.cut}".encode("utf-8", "surrogateescape"))
    return "sha256:" + digest.hexdigest()


def _file_entry(root: Path, relative: str) -> str:
    """A regular file's line, read without following a symlink swapped in since the scan."""
    fd = os.open(root / relative, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        digest = hashlib.sha256()
        if stat.S_ISREG(info.st_mode):
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    executable = "x" if info.st_mode & stat.S_IXUSR else "-"
    return f"F {relative} {executable} sha256:{digest.hexdigest()}"


def path_hash(path: Path) -> str:
    """tree_hash for a directory, file_hash for a file."""
    return tree_hash(path) if path.is_dir() else file_hash(path)
