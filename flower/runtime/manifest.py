"""manifest.json: one row per step attempt, shared by every run in a run_dir.

Each write re-reads the file under a file lock, replaces this run's rows and keeps everyone
else's, then swaps the new file in atomically. Parallel flower processes in one directory
therefore never lose each other's rows (upstream's unlocked re-read/rewrite could).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from datetime import date, datetime, time
from enum import Enum
from pathlib import Path, PurePath
from typing import Any

from filelock import FileLock

from flower.fileio import write_atomic

log = logging.getLogger(__name__)


def new_run_id() -> str:
    """`YYYYmmdd-HHMMSS-<6 hex>`: sortable by start time, unique across parallel processes."""
    return f"{datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    raise TypeError(f"manifest row value of type {type(value).__name__} is not JSON-serialisable: {value!r}")


class Manifest:
    def __init__(self, path: str | Path, run_id: str) -> None:
        self.path = Path(path)
        self.run_id = run_id
        self._lock = FileLock(f"{self.path}.lock")

    def write(self, rows: list[dict[str, Any]]) -> None:
        """Make `rows` the complete set of this run's rows; other runs' rows are kept as they are."""
        # Serialise first: a bad value must fail before we touch the file.
        mine = json.loads(json.dumps([{**row, "run": self.run_id} for row in rows], default=_json_default))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            others = [r for r in self._load(move_corrupt_aside=True) if r.get("run") != self.run_id]
            self._replace(others + mine)

    def read(self) -> list[dict[str, Any]]:
        """All rows of all runs ([] if the file is missing or unreadable)."""
        return self._load(move_corrupt_aside=False)

    def rows_for_run(self, run_id: str) -> list[dict[str, Any]]:
        return [r for r in self.read() if r.get("run") == run_id]

    def _load(self, *, move_corrupt_aside: bool) -> list[dict[str, Any]]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        if not raw.strip():
            return []
        try:
            rows = json.loads(raw.decode("utf-8"))
            if isinstance(rows, list) and all(isinstance(r, dict) for r in rows):
                return rows
        except ValueError:  # JSONDecodeError and UnicodeDecodeError
            pass
        if move_corrupt_aside:
            # Keep the evidence: the next write would otherwise overwrite it for good.
            aside = self.path.with_name(f"{self.path.name}.corrupt-{datetime.now():%Y%m%d-%H%M%S-%f}")
            os.replace(self.path, aside)
            log.warning("manifest %s was not a JSON array of rows; moved it to %s", self.path, aside)
        else:
            log.warning("manifest %s is not a JSON array of rows; reading it as empty", self.path)
        return []

    def _replace(self, rows: list[dict[str, Any]]) -> None:
        write_atomic(self.path, json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
