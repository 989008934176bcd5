"""A job's final status (the bottom of the job model: outcome and classes both use it)."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """Final status of a job.

    passed   the workflow succeeded and the check (if any) exited 0
    failed   a verdict: the workflow reported failure or the check exited non-zero
    error    no verdict: the job could not run or crashed (container, image, orchestrator)
    timeout  stopped at the job's timeout
    budget   stopped by the job's or the batch's budget
    paused   a persistent job stopped at its budget, session and workspace kept: `wake` with a
             higher --budget-usd (or `matrix` again with a higher batch cap) continues it
    skipped  not run (e.g. the batch budget was spent before it started)
    """

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    TIMEOUT = "timeout"
    BUDGET = "budget"
    PAUSED = "paused"
    SKIPPED = "skipped"
