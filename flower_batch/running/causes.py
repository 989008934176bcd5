"""The real cause of a job's end, for its record: what flower left in runs/.exit.json, what
Docker says about the container (OOMKilled, exit 137), and the failure class that follows.

The runner decides the status from what it saw (exit code, timeout, budget, check); this module
replaces "the workflow exited 1" with flower's own line and moves a job whose failure was not
the agent's (a refused key, an unreadable sessions.db, a kill from outside) to `error`.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flower import exitinfo
from flower.catalogue.names import CONTINUITY_FILE, EXIT_FILE
from flower.flows.continuity import parse_continuity
from flower_batch.errors import FlowerBatchError
from flower_batch.jobmodel.classes import FailureClass, class_from_status
from flower_batch.jobmodel.status import Status
from flower_batch.jobmodel.units import format_memory
from flower_batch.untrusted_files import read_head

SIGKILL_EXIT = 137
_API_STATUS = re.compile(r"\bAPI error (\d{3})\b")


def new_stamp(job_id: str) -> str:
    """A value for FLOWER_RUN_STAMP, new for every container flower-batch starts."""
    return f"{job_id}-{secrets.token_hex(6)}"


@dataclass(frozen=True)
class Ending:
    """What the container's end looked like from outside."""

    exit_code: int | None
    timed_out: bool = False
    oom_killed: bool = False
    memory_bytes: int | None = None


@dataclass(frozen=True)
class Verdict:
    status: Status
    reason: str | None
    failure_class: FailureClass


# The job wrote runs/: its files are read without following a link, regular files only, capped.
EXIT_FILE_LIMIT = 64 * 1024
CONTINUITY_LIMIT = 4 * 1024 * 1024


def _job_text(runs: Path, name: str, limit: int) -> str | None:
    try:
        got = read_head(runs, name, limit)
    except (OSError, FlowerBatchError):  # missing, a link, a FIFO, a device
        return None
    return None if got.cut else got.data.decode("utf-8", "replace")


def flower_exit(runs: Path, stamp: str) -> dict[str, Any] | None:
    """flower's cause of this container's exit, or None (missing, damaged, an earlier run's)."""
    text = _job_text(runs, EXIT_FILE, EXIT_FILE_LIMIT)
    return None if text is None else exitinfo.parse(text, stamp=stamp)


def continuity_of(runs: Path, stamp: str) -> tuple[dict[str, Any], ...]:
    text = _job_text(runs, CONTINUITY_FILE, CONTINUITY_LIMIT)
    return tuple((None if text is None else parse_continuity(text, stamp=stamp)) or ())


def explain(
    status: Status,
    reason: str | None,
    ending: Ending,
    cause: dict[str, Any] | None,
    *,
    check_exit: int | None = None,
    fallback: str = "",
) -> Verdict:
    """The status, reason and class of a job, given the runner's status and reason.

    `fallback` is the reason to use when the workflow failed and nobody knows better (the
    runner's "the workflow exited N: <last manifest error>").
    """
    if status is Status.TIMEOUT:
        during = f" (during step {cause['step']})" if cause and cause.get("step") else ""
        return Verdict(status, f"{reason}{during}", FailureClass.TIMEOUT)
    if status is not Status.FAILED or ending.exit_code in (None, 0):
        return Verdict(status, reason, class_from_status(status, check_exit))
    # The workflow failed: say why, as precisely as flower or Docker can.
    if ending.oom_killed:
        limit = f" {format_memory(ending.memory_bytes)}" if ending.memory_bytes else ""
        return Verdict(
            Status.FAILED,
            f"killed: out of memory (the job's memory limit{limit} was reached; Docker reports OOMKilled)",
            FailureClass.AGENT,
        )
    if cause is not None:
        return _from_flower(cause, fallback)
    code = ending.exit_code or 0
    if code == SIGKILL_EXIT:
        return Verdict(
            Status.ERROR,
            "killed from outside: SIGKILL (exit 137), not by flower-batch's timeout and not out of memory",
            FailureClass.INFRASTRUCTURE,
        )
    if code > 128:
        return Verdict(
            Status.ERROR,
            f"killed from outside by signal {code - 128} (exit {code})",
            FailureClass.INFRASTRUCTURE,
        )
    return Verdict(Status.FAILED, fallback or reason, FailureClass.AGENT)


def _from_flower(cause: dict[str, Any], fallback: str) -> Verdict:
    kind, text = cause["class"], cause["reason"]
    if kind == "api":
        found = _API_STATUS.search(text)
        http = int(found.group(1)) if found else None
        if http == 402:
            return Verdict(Status.BUDGET, text, FailureClass.BUDGET)
        if http in (401, 403):
            return Verdict(Status.ERROR, text, FailureClass.INFRASTRUCTURE)
        return Verdict(Status.FAILED, text, FailureClass.AGENT)
    if kind == "disk":  # flower's /runs is full: the job's own writes, never retried as infrastructure
        return Verdict(Status.DISK, text, FailureClass.DISK)
    if kind in ("database", "crash"):
        return Verdict(Status.ERROR, text, FailureClass.INFRASTRUCTURE)
    if kind in ("signal", "interrupted"):
        return Verdict(
            Status.ERROR,
            f"{text}; not the job's timeout: sent from outside (flower-batch stop, "
            "docker stop, a host shutdown)",
            FailureClass.INFRASTRUCTURE,
        )
    if kind == "done":  # flower said all was well but the container did not exit 0
        return Verdict(Status.ERROR, fallback or text, FailureClass.INFRASTRUCTURE)
    return Verdict(Status.FAILED, text, FailureClass.AGENT)  # target, workflow, step, usage


def continuity_lines(entries: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> list[str]:
    """One line per step: "step fix: continued session 9f1c2a3b… (lineage.json)" or
    "step fix: started fresh: lineage.json unreadable: …"."""
    lines = []
    for e in entries:
        reason = str(e.get("reason") or "")
        if e.get("continued"):
            lines.append(f"step {e.get('step')}: {reason}")
        else:
            lines.append(f"step {e.get('step')}: started fresh: {reason}")
    return lines
