"""The side-by-side comparison: rows = tasks, columns = variants, one `Cell` each.

A cell aggregates the repeats of one (task, variant): pass rate with a 95% Wilson
interval, mean reward (over jobs a verifier graded: Harbor tasks), mean cost (over jobs whose
cost is known), mean turns and mean duration.
Jobs without an outcome yet are `pending`; skipped and paused jobs (no verdict yet) are not
counted in `n`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.status import Status

Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion; None when n == 0."""
    if n <= 0:
        return None
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exact ends, no rounding residue
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class Cell:
    """Aggregate of some jobs (a task x variant cell, a column total or the overall total)."""

    job_ids: tuple[str, ...]
    n: int
    passed: int
    pending: int
    statuses: dict[str, int] = field(default_factory=dict)
    ci95: tuple[float, float] | None = None
    mean_cost_usd: float | None = None
    total_cost_usd: float | None = None
    cost_known: int = 0
    mean_turns: float | None = None
    mean_duration_s: float | None = None
    mean_reward: float | None = None
    rewarded: int = 0
    """Jobs whose verifier wrote a reward (the mean is over these)."""

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.n if self.n else None

    def to_dict(self) -> dict[str, object]:
        return {
            "jobs": list(self.job_ids),
            "n": self.n,
            "passed": self.passed,
            "pending": self.pending,
            "pass_rate": self.pass_rate,
            "ci95": list(self.ci95) if self.ci95 else None,
            "statuses": self.statuses,
            "mean_cost_usd": self.mean_cost_usd,
            "total_cost_usd": self.total_cost_usd,
            "cost_known": self.cost_known,
            "mean_turns": self.mean_turns,
            "mean_duration_s": self.mean_duration_s,
            # Only where a verifier graded a job: a batch without one reads as before.
            **({"mean_reward": self.mean_reward, "rewarded": self.rewarded} if self.rewarded else {}),
        }


def aggregate(job_ids: Sequence[str], outcomes: Mapping[str, JobOutcome]) -> Cell:
    done = [outcomes[j] for j in job_ids if j in outcomes]
    counted = [o for o in done if o.status not in (Status.SKIPPED, Status.PAUSED)]
    passed = sum(o.passed for o in counted)
    costs = [o.cost_usd for o in counted if o.cost_usd is not None]
    rewards = [o.reward.value for o in counted if o.reward is not None]
    statuses: dict[str, int] = {}
    for outcome in done:
        statuses[outcome.status.value] = statuses.get(outcome.status.value, 0) + 1
    return Cell(
        job_ids=tuple(job_ids),
        n=len(counted),
        passed=passed,
        pending=len(job_ids) - len(done),
        statuses=dict(sorted(statuses.items())),
        ci95=wilson_interval(passed, len(counted)),
        mean_cost_usd=_mean(costs),
        total_cost_usd=sum(costs) if costs else None,
        cost_known=len(costs),
        mean_turns=_mean([o.num_turns for o in counted if o.num_turns is not None]),
        mean_duration_s=_mean([o.duration_s for o in counted if o.duration_s is not None]),
        mean_reward=_mean(rewards),
        rewarded=len(rewards),
    )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class Comparison:
    tasks: tuple[str, ...]
    variants: tuple[str, ...]
    cells: dict[tuple[str, str], Cell]
    variant_totals: dict[str, Cell]
    overall: Cell

    @property
    def has_rewards(self) -> bool:
        """Some job was graded by a verifier: the reward is shown beside the pass rate."""
        return self.overall.rewarded > 0

    def cell(self, task: str, variant: str) -> Cell | None:
        """None when the matrix has no job for this pair (e.g. excluded)."""
        return self.cells.get((task, variant))


def compare(jobs: Sequence[JobSpec], outcomes: Mapping[str, JobOutcome]) -> Comparison:
    tasks = tuple(dict.fromkeys(job.task for job in jobs))
    variants = tuple(dict.fromkeys(job.variant for job in jobs))
    grouped: dict[tuple[str, str], list[str]] = {}
    for job in sorted(jobs, key=lambda j: (tasks.index(j.task), variants.index(j.variant), j.repeat)):
        grouped.setdefault((job.task, job.variant), []).append(job.id)
    cells = {key: aggregate(ids, outcomes) for key, ids in grouped.items()}
    totals = {
        variant: aggregate([i for (_, v), ids in grouped.items() if v == variant for i in ids], outcomes)
        for variant in variants
    }
    overall = aggregate([i for ids in grouped.values() for i in ids], outcomes)
    return Comparison(tasks, variants, cells, totals, overall)
