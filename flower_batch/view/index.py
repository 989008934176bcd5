"""The batches of a home and the job rows of a batch, read from record.json files only.

A 5,000-job batch must list in well under 2 s and be polled every 2 s while it runs, so each
record is parsed once and kept with its (mtime, size): a poll costs one stat per job, and a
re-read only for records that changed. sessions.db is never opened for a list. A record is read
through flower_batch/untrusted_files.py (no symlink followed, a regular file, at most RECORD_BYTES).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flower_batch.errors import RecordError
from flower_batch.jobmodel.record import RECORD_NAME, RecordHead
from flower_batch.jobmodel.status import Status

from ..layout import check_name
from ..untrusted_files import read_head

RECORD_BYTES = 32 * 1024 * 1024  # a bigger record.json is listed as unreadable, never parsed
UNREADABLE = "unreadable"  # a row whose record.json could not be read: not a status of a job
STATUS_ORDER = (
    Status.RUNNING,
    Status.QUEUED,
    Status.FAILED,
    Status.ERROR,
    Status.TIMEOUT,
    Status.BUDGET,
    Status.DISK,
    Status.PAUSED,
    Status.PASSED,
    Status.SKIPPED,
    UNREADABLE,
)


@dataclass(frozen=True)
class _Cached:
    stamp: tuple[int, int]
    row: dict[str, Any]


class RecordIndex:
    """Thread-safe cache of job rows: batch -> job folder name -> (record stamp, row)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._rows: dict[str, dict[str, _Cached]] = {}
        self._lock = threading.Lock()

    def batches(self) -> list[dict[str, Any]]:
        if not self.home.is_dir():
            return []
        out = []
        for entry in sorted(os.scandir(self.home), key=lambda e: e.name):
            if not entry.is_dir() or entry.name.startswith("."):
                continue
            rows, version = self.rows(entry.name)
            counts: dict[str, int] = {}
            for row in rows:
                counts[row["status"]] = counts.get(row["status"], 0) + 1
            meta = _batch_meta(Path(entry.path) / "batch.json")
            out.append(
                {
                    "name": entry.name,
                    "jobs": len(rows),
                    "counts": counts,
                    "version": version,
                    "gateway_modes": meta.get("gateway_modes"),
                    "updated_at": meta.get("updated_at"),
                }
            )
        return out

    def rows(self, batch: str) -> tuple[list[dict[str, Any]], str]:
        """Every job row of `batch` (by job id) and a version that changes when any record does."""
        bdir = self.home / check_name("batch", batch)
        if not bdir.is_dir():
            return [], ""
        with self._lock:
            cache = self._rows.get(batch, {})
        fresh: dict[str, _Cached] = {}  # rebuilt each time: jobs whose folder went away drop out
        stamps = hashlib.sha1()
        base = str(bdir)
        for name in sorted(e.name for e in os.scandir(base) if not e.name.startswith(".") and e.is_dir()):
            path = os.path.join(base, name, RECORD_NAME)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            stamp = (st.st_mtime_ns, st.st_size)
            stamps.update(f"{name}:{stamp}\n".encode())
            cached = cache.get(name)
            if cached is None or cached.stamp != stamp:
                cached = _Cached(stamp, _row(name, Path(path)))
            fresh[name] = cached
        with self._lock:
            self._rows[batch] = fresh
        return [c.row for c in fresh.values()], stamps.hexdigest()[:16]


def _row(job: str, path: Path) -> dict[str, Any]:
    # A light read (jobmodel's RecordHead): the record's required fields are checked, its steps
    # are not built (most of the cost of parsing 5,000 records; the list shows none of them).
    try:
        read = read_head(path.parent.parent, f"{job}/{path.name}", RECORD_BYTES)
        if read.cut:
            raise RecordError(f"over {RECORD_BYTES} bytes, not read")
        head = RecordHead.from_dict(json.loads(read.data))
    except (OSError, ValueError) as exc:  # RecordError is a ValueError
        problem = f"{path}: {exc}"
        return {
            "id": job,
            "status": UNREADABLE,
            "reason": problem,
            "task": "",
            "variant": "",
            "matrix": "",
            "search": f"{job} {UNREADABLE} {problem}".lower(),
        }
    row = {
        "id": head.job_id,
        "status": head.status.value,
        "task": head.task,
        "variant": head.variant,
        "repeat": head.repeat,
        "matrix": " ".join(f"{k}={_short(v)}" for k, v in head.matrix.items()),
        **head.shown,
        "steps": head.steps,
    }
    row["search"] = " ".join(
        str(row[k] or "") for k in ("id", "status", "task", "variant", "matrix", "reason")
    ).lower()
    return row


def _short(value: object) -> str:
    text = value.get("name", json.dumps(value)) if isinstance(value, dict) else str(value)
    text = str(text)
    return text if len(text) <= 40 else text[:37] + "..."


def _batch_meta(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def select(
    rows: list[dict[str, Any]], *, status: str = "", text: str = "", offset: int = 0, limit: int = 200
) -> dict[str, Any]:
    """One page of rows matching a status and a text (all words, any field), with counts."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    words = text.lower().split()
    hits = [r for r in rows if (not status or r["status"] == status) and all(w in r["search"] for w in words)]
    offset = max(0, min(offset, len(hits)))
    page = [{k: v for k, v in r.items() if k != "search"} for r in hits[offset : offset + max(1, limit)]]
    ordered = {s: counts[s] for s in STATUS_ORDER if s in counts}
    return {
        "total": len(rows),
        "matched": len(hits),
        "offset": offset,
        "limit": limit,
        "counts": ordered,
        "jobs": page,
    }
