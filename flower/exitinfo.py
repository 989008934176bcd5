"""runs/.exit.json: why this flower process ended, in one line, for whoever started it.

flower prints its errors on the terminal; an orchestrator that started flower in a container
only sees an exit code. So flower also leaves the cause where the orchestrator reads it, next to
manifest.json::

    {"format": "flower/exit@1", "code": 1, "class": "target",
     "reason": "target 'boom.py:main': importing boom.py failed: RuntimeError: no", "step": null,
     "stamp": "<FLOWER_RUN_STAMP>", "at": "2026-…"}

`stamp` is the value of $FLOWER_RUN_STAMP when flower started (the orchestrator sets a new one
per container), so a file left by an earlier run is never taken for this run's.

Classes: done, usage, target (the workflow module or attribute), workflow (its definition or a
callback), database (sessions.db), disk (flower's own writes found the run directory's disk
full: flower.full_disk), api (a fatal API error: 401, 402, ...), step (a step
failed), timeout (the deadline passed: the step wrote its notes and stopped, see
flower.runtime.limits), signal (SIGTERM/SIGHUP), interrupted (Ctrl-C), crash (anything else).

Writing is bookkeeping: it never raises, and it never creates the run directory (a usage error
typed in some folder must not leave a runs/ there).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from flower.catalogue.names import EXIT_FILE
from flower.catalogue.runtime import LIMITS_TIMED_OUT
from flower.catalogue.terminal import step_label
from flower.clock import now_iso
from flower.fileio import write_atomic

EXIT_FORMAT = "flower/exit@1"
STAMP_ENV = "FLOWER_RUN_STAMP"
CLASSES = (
    "done",
    "usage",
    "target",
    "workflow",
    "database",
    "disk",
    "api",
    "step",
    "timeout",
    "signal",
    "interrupted",
    "crash",
)
REASON_LIMIT = 500


def exit_path(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / EXIT_FILE


def clear(run_dir: str | os.PathLike[str]) -> None:
    """Remove an earlier process's file (flower does this as it starts)."""
    try:
        exit_path(run_dir).unlink(missing_ok=True)
    except OSError:
        pass


def leave(
    run_dir: str | os.PathLike[str],
    *,
    code: int,
    kind: str,
    reason: str,
    step: str | None = None,
    stamp: str | None = None,
) -> None:
    """Write the cause of this exit atomically; silently nothing when run_dir does not exist.
    `stamp`: $FLOWER_RUN_STAMP as the process read it where it started."""
    if kind not in CLASSES:
        raise ValueError(f"exit class {kind!r} is not one of {', '.join(CLASSES)}")
    directory = Path(run_dir)
    if not directory.is_dir():
        return
    data = {
        "format": EXIT_FORMAT,
        "code": int(code),
        "class": kind,
        "reason": one_line(reason, REASON_LIMIT),
        "step": step,
        "stamp": stamp,
        "at": now_iso(),
    }
    try:
        write_atomic(exit_path(directory), json.dumps(data, ensure_ascii=False) + "\n")
    except OSError:
        pass


def read(run_dir: str | os.PathLike[str], *, stamp: str | None = None) -> dict[str, Any] | None:
    """The cause left in run_dir, or None: missing, unreadable, not ours, or (with `stamp`)
    written by a process started with another stamp."""
    try:
        text = exit_path(run_dir).read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    return parse(text, stamp=stamp)


def parse(text: str, *, stamp: str | None = None) -> dict[str, Any] | None:
    """`read`'s checks on the file's text (an orchestrator reads a job's file its own bounded way)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("format") != EXIT_FORMAT:
        return None
    if data.get("class") not in CLASSES or not isinstance(data.get("reason"), str):
        return None
    if not isinstance(data.get("code"), int) or isinstance(data.get("code"), bool):
        return None
    if stamp is not None and data.get("stamp") != stamp:
        return None
    step = data.get("step")
    return {
        "code": data["code"],
        "class": data["class"],
        "reason": data["reason"],
        "step": step if isinstance(step, str) else None,
        "stamp": data.get("stamp"),
    }


def one_line(text: str, limit: int | None = None) -> str:
    """`text` as one line: every run of whitespace (newlines and tabs too) one space, the ends
    stripped; with a `limit`, at most that many characters, the last one "…" when it was cut.

    The one such helper for flower and flower_batch (an error or a reason quoted in a line)."""
    flat = " ".join(str(text).split())
    return flat if limit is None or len(flat) <= limit else flat[: limit - 1] + "…"


def step_failure(ctx: dict[str, Any]) -> tuple[str, str, str] | None:
    """(class, reason, step) for a workflow run that stopped at a failed step, else None.

    A fatal API error (its HTTP status known to the runtime) is class "api"; a gate that gave
    up, or a step whose result was fine but never passed its gate, is class "step".
    """
    disk_full = ctx.get("_disk_full")
    if disk_full:  # flower's own writes found the run directory's disk full (flower.full_disk)
        step, reason = disk_full
        return "disk", reason, step
    failed = ctx.get("_failed_at")
    if not failed:
        return None
    shown = step_label(failed)  # the person reads the reason; `step` keeps the workflow's name
    result = (ctx.get("_results") or {}).get(failed)
    aborted = ctx.get("_aborted")
    if aborted:
        return "step", f"step {shown}: its gate gave up: {aborted}", failed
    if result is None:
        return "step", f"step {shown} failed", failed
    if result.ok:
        return "step", f"step {shown}: its gate did not pass the result", failed
    error = result.error or "failed"
    if error.startswith(LIMITS_TIMED_OUT):
        return "timeout", f"step {shown}: {error}", failed
    if "DatabaseError" in error or "database disk image" in error:
        return "database", f"step {shown}: the session store failed: {error}", failed
    status = getattr(result, "api_error_status", None)
    if status is not None and 400 <= status < 500 and status not in (408, 429):
        return "api", f"step {shown}: API error {status}: {error}", failed
    return "step", f"step {shown} failed: {error}", failed
