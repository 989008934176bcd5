"""A size budget for the free text of a batch's reports: each job's log tail and check output.

Everything else in results.json and report.html grows by a fixed, small amount per job; these
two texts are what would make a 5,000-job report.html too big to open (4 KB of log tail per job
is 20 MB by itself). So all jobs together get `TEXT_BUDGET` characters: a small batch keeps its
texts whole, a large one keeps the last part of each, marked as shortened. The job's folder
(`logs/`, record.json) keeps the whole text; `flower-batch view` shows it.
"""

from __future__ import annotations

from dataclasses import replace

from ._results import BatchResults

TEXT_BUDGET = 2_500_000  # characters of log tail + check output over all jobs of a report
MIN_PER_JOB = 240  # never less than this per text: the last lines are what tell a failure apart
SHORTENED = "… (shortened to fit the report; the whole text is in the job's folder)\n"


def per_job_limits(n_jobs: int) -> tuple[int, int]:
    """(log tail, check output) characters each job may keep. Check output gets the larger share:
    it is the verifier's verdict; the log tail repeats much of what the steps table says."""
    share = TEXT_BUDGET // max(n_jobs, 1)
    return max(MIN_PER_JOB, share * 2 // 5), max(MIN_PER_JOB, share * 3 // 5)


def fit_texts(results: BatchResults) -> BatchResults:
    """`results` with every job's log tail and check output cut to its share of the budget."""
    log_limit, check_limit = per_job_limits(len(results.jobs))
    outcomes = {
        job_id: replace(
            o, log_tail=_tail(o.log_tail, log_limit), check_output=_tail(o.check_output, check_limit)
        )
        for job_id, o in results.outcomes.items()
    }
    return replace(results, outcomes=outcomes)


def _tail(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return SHORTENED + text[-limit:]
