"""`matrix --infra-retries N`: jobs that ended in the infrastructure class are run again, whole,
up to N more times. Only infrastructure: an agent, verifier, timeout or budget result is a
verdict and is kept (re-running those is `--retry-failed`, asked for explicitly).

A retry is a normal re-run of the job (its previous record as `previous`), so it goes through
the same path as any re-run and its attempt number goes up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from flower_batch.jobmodel.classes import FailureClass
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.status import Status

Round = Callable[[Sequence[tuple[JobSpec, JobRecord | None]]], Awaitable[dict[str, JobRecord]]]
RetryHook = Callable[[int, list[str]], None]  # (retry number, job ids)


def is_infrastructure(record: JobRecord) -> bool:
    """Ended in the infrastructure class, and ran: a job skipped at the home's reserve would only
    be skipped again in this command (the same command later runs it)."""
    outcome = record.outcome()
    ran = record.status is not Status.SKIPPED
    return ran and outcome is not None and outcome.klass is FailureClass.INFRASTRUCTURE


async def run_with_infra_retries(
    run_round: Round,
    jobs: Sequence[tuple[JobSpec, JobRecord | None]],
    *,
    retries: int,
    on_retry: RetryHook | None = None,
) -> dict[str, JobRecord]:
    """Run `jobs` once, then re-run the ones that ended infrastructure, at most `retries` times."""
    done = dict(await run_round(jobs))
    for n in range(1, retries + 1):
        again = [(job, done[job.id]) for job, _ in jobs if job.id in done and is_infrastructure(done[job.id])]
        if not again:
            break
        if on_retry is not None:
            on_retry(n, [job.id for job, _ in again])
        done.update(await run_round(again))
    return done
