"""What a record's state really is, when the orchestrator that wrote it may be gone.

A record says `running` or `queued` only while some orchestrator's lease owns the job. That
session holds its lock file (session.py) for as long as it lives, so a reader can tell:

    running, session alive     running
    running, session gone      orphaned       (kill -9, a crash: its container may still run, unwatched)
    queued,  session alive     queued
    queued,  session gone      never-started  (the orchestrator died before the job's turn)
    skipped "never started: …" never-started  (Ctrl-C: the orchestrator wrote so itself)

Nothing on disk changes: `wake` or the same `matrix` command again repairs the record by
running the job (the resume plan re-runs unfinished and skipped jobs). An orphaned job's
container (and its gateway) may still be running, since nothing stopped them: `wake` refuses
while it is, and `stop` or `gc` ends what is left first.

Records written before they named their session: any live session of the home may own them.
"""

from __future__ import annotations

from pathlib import Path

from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.status import Status
from flower_batch.running.lease import is_alive, leases_dir

ORPHANED = "orphaned"
NEVER_STARTED = "never-started"
NEVER_STARTED_REASON = "never started"  # how the reason of such a record begins
STALE_STATES = (ORPHANED, NEVER_STARTED)


class Liveness:
    """Answers "is the orchestrator of this record still there?" for one listing (cached)."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self._alive: dict[str, bool] = {}
        self._any: bool | None = None

    def lease_alive(self, lease: str) -> bool:
        if lease not in self._alive:
            self._alive[lease] = is_alive(self.home, lease)
        return self._alive[lease]

    def any_alive(self) -> bool:
        if self._any is None:
            locks = sorted(leases_dir(self.home).glob("*.lock"))
            self._any = any(self.lease_alive(p.stem) for p in locks)
        return self._any

    def owner_alive(self, record: JobRecord) -> bool:
        return self.lease_alive(record.session) if record.session else self.any_alive()

    def status(self, record: JobRecord) -> str:
        """The state to show: the record's own, or orphaned / never-started (see the module doc)."""
        if record.finished:
            never = record.status is Status.SKIPPED and (record.reason or "").startswith(NEVER_STARTED_REASON)
            return NEVER_STARTED if never else record.status
        if self.owner_alive(record):
            return record.status
        return ORPHANED if record.status is Status.RUNNING else NEVER_STARTED

    def reason(self, record: JobRecord) -> str | None:
        """The record's reason, or for a stale record the one line that explains it."""
        shown = self.status(record)
        if record.finished or shown not in STALE_STATES:
            return record.reason
        who = f"its orchestrator (session {record.session})" if record.session else "its orchestrator"
        if shown == ORPHANED:
            return (
                f"orphaned: {who} is gone while the job was running; its container may still run "
                "(`flower-batch stop` or `gc` ends it), then `flower-batch wake` (a persistent job) or "
                "the same matrix command again re-runs it"
            )
        return (
            f"{NEVER_STARTED_REASON}: {who} is gone before the job's turn; the same matrix command "
            "again runs it"
        )
