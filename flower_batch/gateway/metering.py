"""Per-job token and cost metering, written durably as the responses stream through the gateway.

Files (in the job's `logs/` folder, written only by the gateway):

    meter.jsonl  append-only; one line per usage update of an exchange (message_start, then
                 message_delta), written before the event is passed on (so it outlives the
                 gateway process: an OOM kill, docker kill or crash) and fsynced once the
                 answer went out (two syncs per answer on the job's wait were most of the
                 latency proxy mode added). The source of truth.
    meter.json   the running summary (atomic replace), for people and tools. Not fsynced: it is
                 derived from meter.jsonl (a restarted gateway rewrites it from there), and
                 two syncs of it per response were most of the latency the gateway added.

An exchange's usage lines are cumulative (the API's message_delta usage is), so the last line of
each exchange counts. A job killed mid-stream keeps its input tokens (sent in message_start) and
the output counted so far; its exchange is marked incomplete. Only the gateway writes here, so a
dying job container cannot lose or fake its cost.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flower.fileio import write_atomic
from flower_batch.errors import no_space

from .prices import TOKEN_FIELDS, cost_usd, price_for

METER_LOG = "meter.jsonl"
METER_SUMMARY = "meter.json"
SUMMARY_FORMAT = "flower-batch/meter@1"
SETTLE_AFTER = 64  # exchanges a meter keeps by id; older finished ones are only summed


def usage_fields(usage: Mapping[str, Any]) -> dict[str, Any]:
    """The billable fields of a Messages-API usage object (plus the cache-write split)."""
    out: dict[str, Any] = {k: int(usage[k]) for k in TOKEN_FIELDS if isinstance(usage.get(k), int | float)}
    split = usage.get("cache_creation")
    if isinstance(split, Mapping):
        out["cache_creation"] = {k: int(v) for k, v in split.items() if isinstance(v, int | float)}
    return out


def merge_usage(before: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """message_delta usage fields are totals so far: a field present in `update` replaces it."""
    return {**before, **usage_fields(update)}


@dataclass
class MeterSummary:
    """What a job spent, as far as the gateway saw. `cost_usd` None = some model is unpriced."""

    job: str
    mode: str = ""
    exchanges: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_FIELDS, 0))
    cost_usd: float | None = 0.0
    cost_known_usd: float = 0.0  # the priced part: a lower bound when cost_usd is None
    unpriced_models: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    incomplete: int = 0  # exchanges cut before their final usage arrived
    refused: int = 0  # requests the budget refused
    refused_reason: str | None = None
    free: bool = False  # replay: nothing was billed
    updated_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": SUMMARY_FORMAT,
            "job": self.job,
            "mode": self.mode,
            "exchanges": self.exchanges,
            "tokens": self.tokens,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
            "cost_known_usd": round(self.cost_known_usd, 6),
            "unpriced_models": self.unpriced_models,
            "models": self.models,
            "incomplete": self.incomplete,
            "refused": self.refused,
            "refused_reason": self.refused_reason,
            "free": self.free,
            "updated_at": self.updated_at,
        }

    @property
    def spent_usd(self) -> float:
        """What counts against a budget: the priced part (unknown models cannot be counted)."""
        return 0.0 if self.free else self.cost_known_usd

    def describe(self) -> str:
        """One line for `show`: tokens and cost."""
        t = self.tokens
        cost = "unknown" if self.cost_usd is None else f"${self.cost_usd:.4f}"
        if self.cost_usd is None and self.cost_known_usd:
            cost += f" (≥ ${self.cost_known_usd:.4f}; no price for {', '.join(self.unpriced_models)})"
        if self.free:
            cost += " (replay: nothing billed)"
        parts = [
            f"{cost} over {self.exchanges} responses",
            f"in {t.get('input_tokens', 0)}",
            f"out {t.get('output_tokens', 0)}",
            f"cache read {t.get('cache_read_input_tokens', 0)}",
            f"cache write {t.get('cache_creation_input_tokens', 0)}",
        ]
        if self.incomplete:
            parts.append(f"{self.incomplete} cut mid-stream")
        if self.refused:
            parts.append(f"{self.refused} refused by the budget")
        return " · ".join(parts)


def fold(lines: Iterable[Mapping[str, Any]], job: str = "") -> MeterSummary:
    """The summary of a meter.jsonl: the last usage line of every exchange, summed."""
    last: dict[str, Mapping[str, Any]] = {}
    summary = MeterSummary(job=job)
    for line in lines:
        kind = line.get("kind")
        if kind == "usage" and isinstance(line.get("ex"), str):
            last[line["ex"]] = line
            summary.mode = str(line.get("mode") or summary.mode)
        elif kind == "refused":
            summary.refused += 1
            summary.refused_reason = str(line.get("reason") or "")
        summary.job = summary.job or str(line.get("job") or "")
    _total(summary, last.values())
    return summary


class ExchangeTotals:
    """Exchanges summed as they settle: what a meter needs to remember of a finished exchange."""

    def __init__(self) -> None:
        self.tokens = dict.fromkeys(TOKEN_FIELDS, 0)
        self.known = 0.0
        self.unpriced: list[str] = []  # distinct models: bounded by the models a job uses
        self.models: list[str] = []
        self.count = 0
        self.incomplete = 0
        self.free = False

    def copy(self) -> ExchangeTotals:
        out = ExchangeTotals()
        out.tokens, out.known, out.unpriced, out.models = (
            dict(self.tokens),
            self.known,
            list(self.unpriced),
            list(self.models),
        )
        out.count, out.incomplete, out.free = self.count, self.incomplete, self.free
        return out

    def add(self, ex: Mapping[str, Any]) -> None:
        self.count += 1
        usage = ex.get("usage") or {}
        for key in TOKEN_FIELDS:
            self.tokens[key] += int(usage.get(key) or 0)
        model = str(ex.get("model") or "")
        if model and model not in self.models:
            self.models.append(model)
        cost = ex.get("cost_usd")
        if isinstance(cost, int | float):
            self.known += float(cost)
        elif model not in self.unpriced:
            self.unpriced.append(model)
        if not ex.get("final"):
            self.incomplete += 1
        self.free = self.free or bool(ex.get("free"))

    def into(self, summary: MeterSummary) -> None:
        summary.exchanges = self.count
        summary.tokens = dict(self.tokens)
        summary.cost_known_usd = self.known
        summary.cost_usd = None if self.unpriced else self.known
        summary.unpriced_models = list(self.unpriced)
        summary.models = list(self.models)
        summary.incomplete = self.incomplete
        summary.free = self.free


def _total(
    summary: MeterSummary, exchanges: Iterable[Mapping[str, Any]], settled: ExchangeTotals | None = None
) -> None:
    totals = settled.copy() if settled is not None else ExchangeTotals()
    for ex in exchanges:
        totals.add(ex)
    totals.into(summary)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """JSON lines of a file; a torn last line (crash mid-write) is skipped."""
    out: list[dict[str, Any]] = []
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return out
    for raw in text.splitlines():
        try:
            item = json.loads(raw)
        except ValueError:
            continue
        if isinstance(item, dict):
            out.append(item)
    return out


def read_meter(logs_dir: Path) -> MeterSummary | None:
    """The job's metered usage from its meter.jsonl; None when the gateway never metered it."""
    path = Path(logs_dir) / METER_LOG
    if not path.exists():
        return None
    return fold(read_lines(path))


def read_summary(logs_dir: Path) -> dict[str, Any] | None:
    """meter.json as written (cheap: used to add up a batch's spend)."""
    try:
        data = json.loads((Path(logs_dir) / METER_SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def append_line(path: Path, record: Mapping[str, Any], *, sync: bool = False) -> None:
    """Append one JSON line, fsynced if `sync` (a torn last line is closed first:
    append_closing_torn)."""
    # Here, not at the top: the host reads meters without paying for the scripted server.
    from flower.scripted.log import append_closing_torn

    path.parent.mkdir(parents=True, exist_ok=True)
    append_closing_torn(
        path, (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode(), sync=sync
    )


def append_durably(path: Path, record: Mapping[str, Any]) -> None:
    """Append one JSON line and fsync it (see append_line)."""
    append_line(path, record, sync=True)


def sync_file(path: Path) -> None:
    """fsync what was appended to `path` without syncing (a file already gone needs nothing)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(path: Path, data: Mapping[str, Any]) -> None:
    write_atomic(path, json.dumps(data, ensure_ascii=False, indent=1) + "\n")


def replace_atomically(path: Path, data: Mapping[str, Any]) -> None:
    """Replace `path` by rename (readers see old or new, never half), without syncing: for
    files derived from a durable one, rewritten on every change."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


METER_ROOM = ".meter-room"
METER_ROOM_BYTES = 256 * 1024
"""Held in a job's log folder while it has room: given up, on a full disk, for the meter lines
of the exchanges already under way (each line about 0.6 KB)."""
METER_ROOM_MIN = 4 * 1024**2
"""Below this much free space a new request of the job is refused, not sent on unmetered."""


def _hold(room: Path) -> None:
    """METER_ROOM_BYTES really written at `room`, once; nothing when the disk has no room."""
    if room.exists():
        return
    try:
        with open(room, "wb") as f:
            f.write(b"\0" * METER_ROOM_BYTES)
    except OSError:
        room.unlink(missing_ok=True)


class JobMeter:
    """The meter of one job inside the gateway. Thread-safe (a job may stream several at once)."""

    def __init__(self, logs_dir: Path, job: str, mode: str, *, free: bool = False) -> None:
        self.logs_dir = Path(logs_dir)
        self.job = job
        self.mode = mode
        self.free = free
        self._lock = threading.Lock()
        self._prefix = secrets.token_hex(3)  # exchange ids stay unique across gateway restarts
        self._count = 0
        self._unsynced = False  # meter.jsonl has lines written but not yet fsynced
        self._load()

    @property
    def log_path(self) -> Path:
        return self.logs_dir / METER_LOG

    def room_to_meter(self) -> str | None:
        """Why a new exchange could not be metered (the job's log folder's disk is full), or
        None. Asked before a request goes on: one that could not be metered is refused. The
        meter's room (METER_ROOM) is held for the lines of the exchanges already under way."""
        try:
            st = os.statvfs(self.logs_dir)
        except OSError:
            return None  # not made yet: the first line makes it, or says why it cannot
        if st.f_bavail * st.f_frsize >= METER_ROOM_MIN:
            _hold(self.logs_dir / METER_ROOM)
            return None
        return (
            f"the gateway cannot meter job {self.job}: the disk of its logs is full; "
            "the request was not sent on (free space: it is retried)"
        )

    def _append(self, line: dict[str, Any], *, sync: bool) -> None:
        """A meter line; on a full disk the meter's room is given up for it and it is tried once more."""
        try:
            append_line(self.log_path, line, sync=sync)
        except OSError as exc:
            room = self.logs_dir / METER_ROOM
            if not no_space(exc) or not room.exists():
                raise
            room.unlink()
            append_line(self.log_path, line, sync=sync)

    def _load(self) -> None:
        """Continue what an earlier gateway metered for this job (a wake), if anything."""
        lines = read_lines(self.log_path)
        # The latest exchanges, by id (an update replaces its exchange's line); older finished
        # ones are folded into `_settled`, so a long job's meter stays small (see _settle).
        self._exchanges: dict[str, dict[str, Any]] = {}
        self._settled = ExchangeTotals()
        self._refused = 0
        self._refused_reason: str | None = None
        for line in lines:
            if line.get("kind") == "usage" and isinstance(line.get("ex"), str):
                self._exchanges.pop(line["ex"], None)
                self._exchanges[line["ex"]] = line
            elif line.get("kind") == "refused":
                self._refused += 1
                self._refused_reason = str(line.get("reason"))
        self._settle()

    def _settle(self) -> None:
        """Fold finished exchanges beyond the last SETTLE_AFTER into the totals. A finished
        exchange gets no more updates (message_delta is its last); the window only guards."""
        while len(self._exchanges) > SETTLE_AFTER:
            oldest = next(iter(self._exchanges))
            if not self._exchanges[oldest].get("final") and len(self._exchanges) <= 4 * SETTLE_AFTER:
                break  # still streaming (or cut): keep it open a while longer
            self._settled.add(self._exchanges.pop(oldest))

    def _check_reset(self) -> None:
        # The host wipes logs/ when a job is re-run from scratch: start counting afresh.
        if (self._exchanges or self._refused or self._settled.count) and not self.log_path.exists():
            self._exchanges, self._settled = {}, ExchangeTotals()
            self._refused, self._refused_reason = 0, None

    def new_exchange(self) -> str:
        with self._lock:
            self._count += 1
            return f"{self._prefix}-{self._count}"

    def update(
        self,
        ex: str,
        model: str,
        usage: Mapping[str, Any],
        *,
        final: bool,
        requested: str = "",
        summary: bool = True,
    ) -> None:
        """Record the cumulative usage of exchange `ex` so far: written before returning (it
        outlives the gateway process), and fsynced with meter.json rewritten — or, with
        `summary=False`, both left to a later write_summary() (after the answer went out).

        `model` is the one that answered; when the price table does not know it, the model the
        request asked for is priced instead (the CLI prices that one too), else cost is unknown.
        """
        with self._lock:
            self._check_reset()
            prior = self._exchanges.get(ex, {}).get("usage") or {}
            merged = merge_usage(prior, usage)
            priced_as = next((m for m in (model, requested) if m and price_for(m)), None)
            cost = 0.0 if self.free else (cost_usd(priced_as, merged) if priced_as else None)
            line = {
                "kind": "usage",
                "ex": ex,
                "job": self.job,
                "mode": self.mode,
                "t": round(time.time(), 3),
                "model": model,
                "priced_as": priced_as,
                "usage": merged,
                "cost_usd": None if cost is None else round(cost, 8),
                "final": final,
                **({"free": True} if self.free else {}),
            }
            self._append(line, sync=summary)
            self._unsynced = self._unsynced or not summary
            self._exchanges.pop(ex, None)
            self._exchanges[ex] = line  # last: the dict is in order of latest update
            self._settle()
            if summary:
                self._write_summary()

    def write_summary(self) -> None:
        """fsync the meter.jsonl lines written since the last sync, then rewrite meter.json
        from what is metered so far."""
        with self._lock:
            unsynced, self._unsynced = self._unsynced, False
        if unsynced:  # outside the lock: another stream of the job must not wait for the disk
            sync_file(self.log_path)
        with self._lock:
            self._check_reset()
            self._write_summary()

    def refused(self, reason: str) -> None:
        with self._lock:
            self._check_reset()
            line = {
                "kind": "refused",
                "job": self.job,
                "mode": self.mode,
                "t": round(time.time(), 3),
                "reason": reason,
            }
            append_durably(self.log_path, line)
            self._refused += 1
            self._refused_reason = reason
            self._write_summary()

    def summary(self) -> MeterSummary:
        with self._lock:
            return self._summary()

    def _summary(self) -> MeterSummary:
        s = MeterSummary(job=self.job, mode=self.mode, updated_at=round(time.time(), 3))
        _total(s, self._exchanges.values(), self._settled)
        s.free = s.free or self.free
        s.refused = self._refused
        s.refused_reason = self._refused_reason
        return s

    def _write_summary(self) -> None:
        replace_atomically(self.logs_dir / METER_SUMMARY, self._summary().to_dict())
