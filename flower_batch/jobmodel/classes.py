"""Failure classes: each finished job ends in exactly one, and the exit code follows from them.

passed          the workflow succeeded and the check (if any) exited 0
agent           the workflow failed: a step failed, the workflow module did not import, the job's
                container ran out of its own memory limit (the agent's resource use), a replay
                whose requests left the recording
verifier        the workflow succeeded but the check exited non-zero
infrastructure  no verdict: the image, the Docker daemon, the gateway, a container that could not
                start or vanished, a kill from outside flower-batch, an API key refused (401/403),
                an unreadable sessions.db
timeout         stopped at the job's timeout
budget          stopped by the job's or the batch's budget (402 from the API included), or not
                started because the batch budget was spent
disk            the job filled its own disk limit (`disk`): its own doing, never retried as
                infrastructure
paused          a persistent job stopped at its budget and resumable: no verdict yet, counted
                apart (a higher cap continues it: `wake --budget-usd`, `matrix --budget-usd`)

Only infrastructure is retried by `matrix` on its own (`--infra-retries`); the others are verdicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum

from .status import Status


class FailureClass(StrEnum):
    PASSED = "passed"
    AGENT = "agent"
    VERIFIER = "verifier"
    INFRASTRUCTURE = "infrastructure"
    TIMEOUT = "timeout"
    BUDGET = "budget"
    DISK = "disk"
    PAUSED = "paused"


CLASS_ORDER = tuple(FailureClass)

EXIT_OK = 0
EXIT_BELOW_THRESHOLD = 1
EXIT_USAGE = 2
EXIT_INFRASTRUCTURE = 3
EXIT_PAUSED = 4


def class_from_status(status: Status, check_exit: int | None = None) -> FailureClass:
    """The class a status implies when nothing more is known (records written before classes)."""
    if status is Status.PASSED:
        return FailureClass.PASSED
    if status is Status.FAILED:
        return FailureClass.VERIFIER if check_exit not in (None, 0) else FailureClass.AGENT
    if status is Status.TIMEOUT:
        return FailureClass.TIMEOUT
    if status in (Status.BUDGET, Status.SKIPPED):
        return FailureClass.BUDGET
    if status is Status.PAUSED:
        return FailureClass.PAUSED
    if status is Status.DISK:
        return FailureClass.DISK
    return FailureClass.INFRASTRUCTURE


def parse_class(value: object) -> FailureClass | None:
    try:
        return FailureClass(str(value)) if value is not None else None
    except ValueError:
        return None


def count_classes(classes: Iterable[FailureClass | None]) -> dict[str, int]:
    """{"passed": n, "agent": n, ..., "pending": n}: every class listed, None = not run yet."""
    counts = {c.value: 0 for c in CLASS_ORDER}
    counts["pending"] = 0
    for c in classes:
        counts[c.value if c is not None else "pending"] += 1
    return counts


def exit_code_for(counts: Mapping[str, int], *, threshold_met: bool, regression: bool = False) -> int:
    """The exit code of `matrix`/`report` from the class counts.

    3 when infrastructure errors remain (the verdict itself is not trustworthy, so this wins
    even when the threshold is met); else 1 on a regression (with --fail-on-regression); else,
    below the threshold, 4 when jobs are paused at the budget (a higher cap may still reach
    it: run again with a higher --budget-usd) and 1 when none is; else 0. Paused jobs count
    as not passed, so a threshold met in spite of them is met.
    """
    if counts.get(FailureClass.INFRASTRUCTURE.value, 0):
        return EXIT_INFRASTRUCTURE
    if regression:
        return EXIT_BELOW_THRESHOLD
    if not threshold_met:
        return EXIT_PAUSED if counts.get(FailureClass.PAUSED.value, 0) else EXIT_BELOW_THRESHOLD
    return EXIT_OK


def exit_code_for_job(failure_class: str | None, *, verdict_ok: bool) -> int:
    """The exit code of `run`/`wake`/`repro` from their one job, by matrix's rule (exit_code_for):
    3 when the job ended in an infrastructure error, else 0 when `verdict_ok` (passed; for
    `repro`, identical), else 1."""
    return exit_code_for(count_classes([parse_class(failure_class)]), threshold_met=verdict_ok)


def describe_counts(counts: Mapping[str, int]) -> str:
    """e.g. "failed: agent 2 · verifier 1 · infrastructure 1" (empty when nothing failed)."""
    parts = [f"{c.value} {counts[c.value]}" for c in CLASS_ORDER[1:] if counts.get(c.value)]
    return ("not passed: " + " · ".join(parts)) if parts else ""
