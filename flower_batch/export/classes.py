"""A finished job's failure class as the reports name it: the runner's, else what its status
implies (a record written before classes existed has none of its own)."""

from __future__ import annotations

from flower_batch.jobmodel.record import JobRecord


def failure_class(record: JobRecord) -> str | None:
    outcome = record.outcome()
    return outcome.klass.value if outcome is not None else None
