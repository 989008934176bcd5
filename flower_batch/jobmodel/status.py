"""A job's state, from queued to its final status: the one enum every status is compared with (the
bottom of the job model: record, outcome and classes all use it).

Nothing outside this module compares a status with a string: ask `Status.X`, `.ended`, or
`NOT_ENDED` (tests/flower_batch/test_typed_record.py holds the tree to that).
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """The state of a job.

    queued   planned, not started yet (the record is written before the container starts)
    running  its container is up: the workflow or its check is running
    passed   the workflow succeeded and the check (if any) exited 0
    failed   a verdict: the workflow reported failure or the check exited non-zero
    error    no verdict: the job could not run or crashed (container, image, orchestrator)
    timeout  stopped at the job's timeout
    budget   stopped by the job's or the batch's budget
    disk     stopped by its own disk limit: it filled the filesystem of its own (`disk`)
    paused   a persistent job stopped at its budget, session and workspace kept: `wake` with a
             higher --budget-usd (or `matrix` again with a higher batch cap) continues it
    skipped  not run (e.g. the batch budget was spent before it started)

    The last eight are final: a job that ended holds one of them (`FINAL`).
    """

    QUEUED = "queued"
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    TIMEOUT = "timeout"
    BUDGET = "budget"
    DISK = "disk"
    PAUSED = "paused"
    SKIPPED = "skipped"

    @property
    def ended(self) -> bool:
        """A final status: the job will not change any more unless it is run (or woken) again."""
        return self not in NOT_ENDED


NOT_ENDED = frozenset({Status.QUEUED, Status.RUNNING})
"""The one definition of "not ended": queued or running."""
FINAL = tuple(s for s in Status if s not in NOT_ENDED)
"""Every final status, in the enum's order (columns of tables and counts)."""


def parse_status(value: object) -> Status | None:
    """The status a stored word names, or None (the caller says where the bad word was)."""
    try:
        return Status(value) if isinstance(value, str) else None
    except ValueError:
        return None


class Phase(StrEnum):
    """What a job reports while it goes that is not a status its record holds (progress only)."""

    CHECKING = "checking"  # the workflow ended and its check runs: the record still says running
    INTERRUPTED = "interrupted"  # the orchestrator was stopped while it ran (the record says error)
    NEVER_STARTED = "never-started"  # the orchestrator was stopped before it started


State = Status | Phase
"""A progress event's state: a status its record now holds, or a phase."""


def still_going(state: State) -> bool:
    """Not ended: queued, running or checking."""
    return state in NOT_ENDED or state == Phase.CHECKING
