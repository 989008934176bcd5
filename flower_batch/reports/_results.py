"""`BatchResults`: the jobs of a batch with their outcomes, and results.json.

Every renderer (terminal table, results.json, JUnit XML, HTML) reads the same
`BatchResults` and its single `Comparison`, so they cannot disagree.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from flower_batch.harbor.shown import fmt_reward, harbor_facts
from flower_batch.jobmodel.modes import mode_label
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.status import Status
from flower_batch.jobmodel.units import format_duration

from ..untrusted_files import read_tail
from ..workspace_diff import summarize
from ._stats import Cell, Comparison, compare

RESULTS_FORMAT = "flower-batch/results@1"


@dataclass
class BatchResults:
    batch: str
    jobs: Sequence[JobSpec]
    outcomes: Mapping[str, JobOutcome]
    image_id: str | None = None
    generated_at: str | None = None
    descriptions: Mapping[str, str] = field(default_factory=dict)
    # Workspace diff summaries by job id (flower_batch.workspace_diff), filled at report time.
    diffs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Jobs without an outcome whose record says more than "pending": job id -> (state, reason),
    # e.g. ("orphaned", "orphaned: its orchestrator … is gone …") (flower_batch/running/liveness.py).
    in_flight: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)

    @cached_property
    def comparison(self) -> Comparison:
        return compare(self.jobs, self.outcomes)

    @cached_property
    def ordered_jobs(self) -> list[JobSpec]:
        """Jobs in table order: task, then variant, then repeat."""
        c = self.comparison
        return sorted(
            self.jobs, key=lambda j: (c.tasks.index(j.task), c.variants.index(j.variant), j.repeat, j.id)
        )

    @property
    def gateway_modes(self) -> tuple[str, ...]:
        """Modes that produced the outcomes (the configured ones while nothing ran yet)."""
        modes = [o.gateway_mode for o in self.outcomes.values()] or [j.gateway.mode for j in self.jobs]
        return tuple(dict.fromkeys(modes))

    @property
    def gateway_label(self) -> str:
        return " + ".join(mode_label(m) for m in self.gateway_modes) or "no model"

    def ci_passed(self, fail_under: float | None = None) -> bool:
        """The CI verdict: every job passed, or (with `fail_under`) passed/all jobs >= it.

        Jobs not run yet, skipped and paused jobs count as not passed.
        """
        total = len(self.jobs)
        passed = sum(1 for job in self.jobs if self.status_of(job.id) == Status.PASSED)
        if fail_under is None:
            return passed == total
        return total > 0 and passed / total >= fail_under

    def class_counts(self) -> dict[str, int]:
        """How many jobs ended in each failure class (jobmodel/classes.py), plus "pending"."""
        from flower_batch.jobmodel.classes import count_classes

        return count_classes(o.klass if (o := self.outcomes.get(job.id)) else None for job in self.jobs)

    def status_of(self, job_id: str) -> str:
        outcome = self.outcomes.get(job_id)
        if outcome:
            return outcome.status.value
        return self.in_flight[job_id][0] if job_id in self.in_flight else "pending"

    def pending_reason(self, job_id: str) -> str | None:
        """Why a job without an outcome has none (None: simply not run yet)."""
        return self.in_flight[job_id][1] if job_id in self.in_flight else None

    def to_document(self) -> dict[str, Any]:
        """The content of results.json."""
        c = self.comparison
        return {
            "format": RESULTS_FORMAT,
            "batch": self.batch,
            "image_id": self.image_id,
            "generated_at": self.generated_at,
            "gateway": {"modes": list(self.gateway_modes), "label": self.gateway_label},
            "tasks": list(c.tasks),
            "variants": list(c.variants),
            "summary": c.overall.to_dict(),
            "classes": self.class_counts(),
            "cells": [{"task": t, "variant": v, **cell.to_dict()} for (t, v), cell in c.cells.items()],
            "variant_totals": [{"variant": v, **cell.to_dict()} for v, cell in c.variant_totals.items()],
            "jobs": [self._job_entry(job) for job in self.ordered_jobs],
        }

    def _job_entry(self, job: JobSpec) -> dict[str, Any]:
        outcome = self.outcomes.get(job.id)
        return {
            "id": job.id,
            "task": job.task,
            "variant": job.variant,
            "repeat": job.repeat,
            "matrix": job.matrix,
            "network": job.network,  # "internet": this job had a route out (docs/security.md)
            # the task's own image (flower brought in), or None: the batch's runtime image
            "task_image": job.task_image.to_dict() if job.task_image else None,
            # a sandbox asked for beyond the default: a writable root, uid 0 (docs/security.md)
            **({"root": job.root} if job.root != "read-only" else {}),
            **({"user": job.user} if job.user != "sandbox" else {}),
            "status": self.status_of(job.id),
            "class": outcome.klass.value if outcome else None,
            **({"reward": outcome.reward.value} if outcome and outcome.reward else {}),
            **({"harbor": harbor_facts(job)} if job.harbor else {}),
            **(
                {"reason": self.pending_reason(job.id)}
                if outcome is None and job.id in self.in_flight
                else {}
            ),
            "outcome": outcome.to_dict() if outcome else None,
            "inputs": job.to_dict(),
            "workspace_diff": self.diffs.get(job.id),
        }


def results_from_records(
    records: Mapping[str, JobRecord],
    *,
    batch: str,
    image_id: str | None = None,
    jobs: Sequence[JobSpec] | None = None,
    log_tails: Mapping[str, str] | None = None,
    generated_at: str | None = None,
    batch_dir: Path | None = None,
    in_flight: Mapping[str, tuple[str, str | None]] | None = None,
) -> BatchResults:
    """Results rebuilt from a batch folder's records (for `flower-batch report <batch>`).

    With `jobs` (the current jobs file) the table follows its order and lists jobs not run
    yet as pending; without it, the jobs come from the specs stored in the records. With
    `batch_dir`, each recorded job's workspace is compared with its task's source (diff summaries).
    """
    tails = log_tails or {}
    if jobs is None:
        jobs = [r.spec for r in records.values()]
    else:  # the image a job ran in is what its record pinned (a jobs file names it, unresolved)
        jobs = [_pinned(job, records.get(job.id)) for job in jobs]
    outcomes = {}
    for job in jobs:
        record = records.get(job.id)
        outcome = record.outcome(tails.get(job.id)) if record is not None else None
        if outcome is not None:
            outcomes[job.id] = outcome
    if image_id is None:
        image_id = next((r.image_id for r in records.values()), None)
    diffs = _diff_summaries(batch_dir, records) if batch_dir is not None else {}
    return BatchResults(
        batch=batch,
        jobs=list(jobs),
        outcomes=outcomes,
        image_id=image_id,
        generated_at=generated_at,
        diffs=diffs,
        in_flight=dict(in_flight or {}),
    )


def _pinned(job: JobSpec, record: JobRecord | None) -> JobSpec:
    if record is None or job.task_image is not None or record.spec.task_image is None:
        return job
    return replace(job, task_image=record.spec.task_image)


LOG_TAIL_BYTES = 4000  # of each job's container.log, for the report's log tails


def log_tails(batch_dir: Path, job_ids: Iterable[str], limit: int = LOG_TAIL_BYTES) -> dict[str, str]:
    """The last `limit` bytes of each job's logs/container.log, read through no symlink and only from
    a regular file (flower_batch/untrusted_files.py): a FIFO or a link to a secret there is skipped, said."""
    tails = {}
    for job_id in job_ids:
        try:
            tails[job_id] = read_tail(Path(batch_dir), f"{job_id}/logs/container.log", limit).data.decode(
                "utf-8", "replace"
            )
        except FileNotFoundError:
            continue
        except OSError as exc:
            tails[job_id] = f"(log not read: {exc})"
    return tails


def _diff_summaries(batch_dir: Path, records: Mapping[str, JobRecord]) -> dict[str, dict[str, Any]]:
    return {
        job_id: summarize(r.spec.workspace, Path(batch_dir) / job_id / "workspace", r.spec.exclude).summary()
        for job_id, r in records.items()
        if r.finished
    }


def write_results_json(results: BatchResults, path: Path) -> Path:
    path.write_text(json.dumps(results.to_document(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


# --- shared formatting (the table and the HTML show the same strings) ---------------------


def fmt_passed(cell: Cell) -> str:
    return f"{cell.passed}/{cell.n}" if cell.n else "-"


def fmt_rate(cell: Cell) -> str:
    return f"{cell.pass_rate:.0%}" if cell.pass_rate is not None else "n/a"


def fmt_ci(cell: Cell) -> str:
    return f"{cell.ci95[0]:.0%}-{cell.ci95[1]:.0%}" if cell.ci95 else ""


def fmt_cost(value: float | None) -> str:
    if value is None:
        return "cost ?"
    return f"${value:.4f}" if value < 1 else f"${value:.2f}"


def fmt_turns(value: float | None) -> str:
    return "? turns" if value is None else f"{value:.1f} turns"


def fmt_mean_reward(cell: Cell) -> str | None:
    """`reward 0.81` (`(3/4 graded)` when some jobs have none), or None: no job was graded."""
    if not cell.rewarded:
        return None
    graded = f" ({cell.rewarded}/{cell.n} graded)" if cell.rewarded < cell.n else ""
    return f"reward {fmt_reward(cell.mean_reward)}{graded}"


def fmt_cell_detail(cell: Cell) -> str:
    """One line under the pass rate: mean reward (graded jobs only), cost, turns, duration (and
    what is missing)."""
    cost = fmt_cost(cell.mean_cost_usd)
    if cell.n and 0 < cell.cost_known < cell.n:
        cost += f" ({cell.cost_known}/{cell.n} known)"
    reward = fmt_mean_reward(cell)
    parts = [
        *([reward] if reward else []),
        cost,
        fmt_turns(cell.mean_turns),
        format_duration(cell.mean_duration_s),
    ]
    if cell.pending:
        parts.append(f"{cell.pending} pending")
    return " · ".join(parts)


def rate_class(cell: Cell | None) -> str:
    """Colour band of a pass rate: good >= 80%, mid >= 50%, bad below, none without data."""
    if cell is None or cell.pass_rate is None:
        return "none"
    if cell.pass_rate >= 0.8:
        return "good"
    return "mid" if cell.pass_rate >= 0.5 else "bad"
