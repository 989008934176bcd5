"""Resume planning: which jobs of a batch to keep and which to (re)run. Pure.

Default (re-running the same command):
    keep   finished with the same inputs hash: passed, failed, timeout, budget, disk
    run    no record, still queued/running (the orchestrator died), unreadable record,
           inputs changed (prompt, workspace files, image id, limits, ...), error
           (no verdict was reached), skipped
    wake   paused at a budget, same inputs but perhaps its own budget_usd: continued in its
           session from where it stopped (a finished step is not re-run)
`retry_failed` also re-runs failed, timeout, budget and disk; `fresh` re-runs everything (a paused
job too: from scratch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from flower_batch.errors import RecordError
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.status import Status

# Statuses that are a measurement of the workflow, worth keeping.
VERDICTS = frozenset({"passed", "failed", "timeout", "budget", "disk"})
RETRYABLE = frozenset({"failed", "timeout", "budget", "disk"})


class Action(StrEnum):
    KEEP = "keep"
    RUN = "run"
    WAKE = "wake"


@dataclass(frozen=True)
class Decision:
    job_id: str
    action: Action
    reason: str
    previous: JobRecord | None = None

    @property
    def attempt(self) -> int:
        """The attempt number a run of this job would have."""
        return self.previous.attempt + 1 if self.previous is not None else 1


@dataclass(frozen=True)
class ResumePlan:
    decisions: tuple[Decision, ...]
    orphans: tuple[str, ...] = ()  # records for job ids the jobs file no longer produces

    @property
    def to_run(self) -> tuple[Decision, ...]:
        """Every job that runs: from scratch (RUN) or continued (WAKE)."""
        return tuple(d for d in self.decisions if d.action is not Action.KEEP)

    @property
    def to_wake(self) -> frozenset[str]:
        return frozenset(d.job_id for d in self.decisions if d.action is Action.WAKE)

    @property
    def to_keep(self) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions if d.action is Action.KEEP)

    def summary(self) -> str:
        woken = f" ({len(self.to_wake)} paused, continued)" if self.to_wake else ""
        return f"{len(self.to_keep)} kept, {len(self.to_run)} to run{woken}" + (
            f", {len(self.orphans)} old records not in the jobs file" if self.orphans else ""
        )


def plan_resume(
    jobs: Sequence[JobSpec],
    image_id: str,
    records: Mapping[str, JobRecord | RecordError],
    *,
    retry_failed: bool = False,
    fresh: bool = False,
) -> ResumePlan:
    """Decide keep/run for every job, in the order of `jobs`."""
    decisions = tuple(_decide(job, image_id, records.get(job.id), retry_failed, fresh) for job in jobs)
    wanted = {job.id for job in jobs}
    orphans = tuple(sorted(job_id for job_id in records if job_id not in wanted))
    return ResumePlan(decisions, orphans)


def _decide(
    job: JobSpec, image_id: str, record: JobRecord | RecordError | None, retry_failed: bool, fresh: bool
) -> Decision:
    if isinstance(record, RecordError):
        return Decision(job.id, Action.RUN, f"record unreadable ({record}); running again")
    if record is None:
        return Decision(job.id, Action.RUN, "new")
    if fresh:
        return Decision(job.id, Action.RUN, "--fresh", record)
    if not record.finished:
        return Decision(
            job.id, Action.RUN, f"unfinished (was {record.status} when the last run stopped)", record
        )
    if record.status is Status.PAUSED and _same_but_budget(job, image_id, record):
        return Decision(job.id, Action.WAKE, "paused at its budget: continued in its session", record)
    if record.inputs_hash != job.inputs_hash(image_id):
        return Decision(job.id, Action.RUN, _what_changed(job, image_id, record), record)
    if record.status not in VERDICTS:
        return Decision(
            job.id,
            Action.RUN,
            f"was {record.status}" + (f": {record.reason}" if record.reason else ""),
            record,
        )
    if retry_failed and record.status in RETRYABLE:
        return Decision(job.id, Action.RUN, f"--retry-failed (was {record.status})", record)
    return Decision(job.id, Action.KEEP, f"{record.status} with the same inputs", record)


def _same_but_budget(job: JobSpec, image_id: str, record: JobRecord) -> bool:
    """The job's inputs are the record's, but for its own budget_usd (raising it continues
    a paused job; the record's spec holds the cap of its last attempt)."""
    return replace(job, budget_usd=record.budget_usd).inputs_hash(image_id) == record.inputs_hash


def _what_changed(job: JobSpec, image_id: str, record: JobRecord) -> str:
    if record.image_id != image_id:
        return f"image changed ({_short(record.image_id)} -> {_short(image_id)})"
    current = job.hashed_inputs(image_id)
    before = record.spec.hashed_inputs(record.image_id)
    changed = [
        key for key in current if key not in ("format", "image_id") and before.get(key) != current[key]
    ]
    names = ["workspace files" if k == "workspace_hash" else k for k in changed]
    return "inputs changed" + (f": {', '.join(names)}" if names else "")


def _short(image_id: str) -> str:
    return image_id.removeprefix("sha256:")[:12]
