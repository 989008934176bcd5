"""Workflow targets already seen to load in an image: a later pre-flight of the same target, with
the same bytes, in the same image, skips the import container (about 2 s of a `run`).

The key is the image id, the target as written, where the job's flows/ holds it, and the hash
of what is imported: the module file (run, matrix) or the whole flows/ copy (wake, repro; written
by flower-batch and mounted read-only in the job). Any change to one of them is another key, so
nothing is ever invalidated by hand. Only successes are kept: a target that failed is checked
again every time. One empty file per key under `<home>/.preflight/imports-ok/`.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from flower_batch.jobmodel.hashing import file_hash, json_hash, tree_hash

from .imports import Target

FOLDER = Path(".preflight") / "imports-ok"


def target_key(image_id: str, target: Target) -> str | None:
    """The key of `target` in `image_id`, or None when its bytes cannot be read (never cached)."""
    try:
        if target.flows_dir is not None:
            content = tree_hash(target.flows_dir)
        elif target.source is not None:
            content = file_hash(target.source)
        else:
            return None
    except OSError:
        return None
    return json_hash([image_id, target.written, target.rel, content]).removeprefix("sha256:")


class ImportCache:
    """`remember` only notes a key; `commit` writes them, once the whole pre-flight passed (a
    refused command changes nothing in the home)."""

    def __init__(self, home: Path) -> None:
        self.folder = Path(home) / FOLDER
        self.pending: list[str] = []

    def known(self, image_id: str, target: Target) -> bool:
        key = target_key(image_id, target)
        return key is not None and (self.folder / key).is_file()

    def remember(self, image_id: str, target: Target) -> None:
        key = target_key(image_id, target)
        if key is not None:
            self.pending.append(key)

    def commit(self) -> None:
        with contextlib.suppress(OSError):  # a cache that cannot be written only costs time
            if self.pending:
                self.folder.mkdir(parents=True, exist_ok=True)
            for key in self.pending:
                (self.folder / key).touch()
        self.pending.clear()
