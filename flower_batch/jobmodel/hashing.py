"""Content hashes: of a workspace tree, a file, and canonical JSON."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from flower_batch.workspace_scan import Rules, Scan, scan

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
    return _digest(_entries(found), found.cut)


def tree_hashes(root: Path, subfolders: tuple[str, ...]) -> dict[str, str]:
    """`tree_hash` of `root` ("") and of each of its `subfolders` (that exist), from one walk:
    a Harbor task folder, its tests/ and its environment/ read once (hundreds of tasks plan)."""
    found = scan(root, Rules())
    if found.cut:  # the walk stopped early: each part on its own, with its own bounds
        hashes = {"": _digest(_entries(found), found.cut)}
        return hashes | {sub: tree_hash(root / sub) for sub in subfolders if (root / sub).is_dir()}
    entries = _entries(found)
    hashes = {"": _digest(entries, None)}
    for sub in subfolders:
        if sub in found.dirs:
            prefix = f"{sub}/"
            inner = [
                (rel.removeprefix(prefix), kind, text)
                for rel, kind, text in entries
                if rel.startswith(prefix)
            ]
            hashes[sub] = _digest(inner, None)
    return hashes


def _entries(found: Scan) -> list[tuple[str, str, str]]:
    """(relative path, kind, what the line says after the path), in path order."""
    entries = [(rel, "D", "") for rel in found.dirs]
    entries += [(rel, "F", _file_entry(found.root, rel)) for rel in found.files]
    entries += [(rel, "L", found.symlinks[rel]) for rel in found.symlinks]
    return sorted(entries)


def _digest(entries: list[tuple[str, str, str]], cut: str | None) -> str:
    digest = hashlib.sha256()
    for relative, kind, text in entries:
        entry = f"{kind} {relative}" + (f" {text}" if kind != "D" else "")
        digest.update(entry.encode("utf-8", "surrogateescape") + b"\0")
    if cut:
        digest.update(f"cut {cut}".encode("utf-8", "surrogateescape"))
    return "sha256:" + digest.hexdigest()


def _file_entry(root: Path, relative: str) -> str:
    """A regular file's line after its path, read without following a symlink swapped in since
    the scan."""
    fd = os.open(root / relative, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        digest = hashlib.sha256()
        if stat.S_ISREG(info.st_mode):
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    executable = "x" if info.st_mode & stat.S_IXUSR else "-"
    return f"{executable} sha256:{digest.hexdigest()}"


def path_hash(path: Path) -> str:
    """tree_hash for a directory, file_hash for a file."""
    return tree_hash(path) if path.is_dir() else file_hash(path)
