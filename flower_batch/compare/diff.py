"""`BatchDiff`: a new batch against its baseline, cell by cell (task x variant), per variant
over all tasks, and overall.

The rule (one for every row, stated in every output): a row is a **regression** or an
**improvement** when Fisher's exact test gives p < alpha AND the Newcombe interval for the
difference at confidence 1 - alpha excludes 0; the sign of the difference says which. Otherwise
it is **no change**; a row where either side has no counted job is **no data**. The two
tests nearly always agree; asking both keeps a borderline p-value from flagging a difference
whose interval still allows none.

Pass rates count jobs as the batch's own table does: skipped, paused and pending jobs are left out of n.
Per-variant rows (when there are several tasks) and the overall row pool only the cells present on both sides, so a task added or
dropped between the runs never shifts a total; those cells are listed apart instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from flower_batch.reports import wilson_interval

from .sides import JobRow, Side
from .stats import fisher_exact, newcombe_interval

COMPARISON_FORMAT = "flower-batch/comparison@1"
REGRESSION, IMPROVEMENT, NO_CHANGE, NO_DATA = "regression", "improvement", "no change", "no data"


def rule_text(alpha: float) -> str:
    level = f"{1 - alpha:.0%}" if round((1 - alpha) * 100, 6).is_integer() else f"{1 - alpha:.1%}"
    return (
        f"regression / improvement: Fisher exact p < {alpha:g} and the {level} Newcombe interval of the "
        "difference excludes 0; otherwise no change (no data when a side has no counted job)"
    )


@dataclass(frozen=True)
class SideStats:
    """One side of one row: counts, classes and per-job means."""

    n: int
    passed: int
    classes: dict[str, int] = field(default_factory=dict)
    mean_cost_usd: float | None = None
    mean_turns: float | None = None
    mean_duration_s: float | None = None
    mean_reward: float | None = None
    rewarded: int = 0
    """Jobs a verifier graded (the mean reward is over these)."""

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.n if self.n else None

    def to_dict(self) -> dict[str, Any]:
        ci95 = wilson_interval(self.passed, self.n)  # the same interval the batch's own table shows
        return {
            "n": self.n,
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "ci95": list(ci95) if ci95 else None,
            "classes": self.classes,
            "mean_cost_usd": self.mean_cost_usd,
            "mean_turns": self.mean_turns,
            "mean_duration_s": self.mean_duration_s,
            **({"mean_reward": self.mean_reward, "rewarded": self.rewarded} if self.rewarded else {}),
        }


def side_stats(rows: Iterable[JobRow]) -> SideStats:
    rows = list(rows)
    counted = [r for r in rows if r.counted]
    classes: dict[str, int] = {}
    for row in rows:
        classes[row.failure_class] = classes.get(row.failure_class, 0) + 1
    return SideStats(
        n=len(counted),
        passed=sum(r.passed for r in counted),
        classes=dict(sorted(classes.items())),
        mean_cost_usd=_mean([r.cost_usd for r in counted]),
        mean_turns=_mean([r.num_turns for r in counted]),
        mean_duration_s=_mean([r.duration_s for r in counted]),
        mean_reward=_mean([r.reward for r in counted]),
        rewarded=sum(r.reward is not None for r in counted),
    )


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _delta(new: float | None, base: float | None) -> float | None:
    return None if new is None or base is None else new - base


@dataclass(frozen=True)
class RowDiff:
    """One row: a cell (task and variant), a variant over all tasks (task None), or overall (both None)."""

    task: str | None
    variant: str | None
    base: SideStats
    new: SideStats
    difference: float | None
    interval: tuple[float, float] | None
    p_value: float | None
    verdict: str

    @property
    def name(self) -> str:
        if self.task is None and self.variant is None:
            return "overall"
        if self.task is None:
            return f"{self.variant} (all tasks)"
        return f"{self.task} × {self.variant}"

    @property
    def cost_delta(self) -> float | None:
        return _delta(self.new.mean_cost_usd, self.base.mean_cost_usd)

    @property
    def turns_delta(self) -> float | None:
        return _delta(self.new.mean_turns, self.base.mean_turns)

    @property
    def duration_delta(self) -> float | None:
        return _delta(self.new.mean_duration_s, self.base.mean_duration_s)

    @property
    def reward_delta(self) -> float | None:
        return _delta(self.new.mean_reward, self.base.mean_reward)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "variant": self.variant,
            "base": self.base.to_dict(),
            "new": self.new.to_dict(),
            "difference": self.difference,
            "interval": list(self.interval) if self.interval else None,
            "p_value": self.p_value,
            "verdict": self.verdict,
            "mean_cost_delta_usd": self.cost_delta,
            "mean_turns_delta": self.turns_delta,
            "mean_duration_delta_s": self.duration_delta,
            **({"mean_reward_delta": self.reward_delta} if self.base.rewarded or self.new.rewarded else {}),
        }


def row_diff(task: str | None, variant: str | None, base: SideStats, new: SideStats, alpha: float) -> RowDiff:
    if base.n == 0 or new.n == 0:
        return RowDiff(task, variant, base, new, None, None, None, NO_DATA)
    difference = new.passed / new.n - base.passed / base.n
    interval = newcombe_interval(new.passed, new.n, base.passed, base.n, alpha=alpha)
    p_value = fisher_exact(new.passed, new.n - new.passed, base.passed, base.n - base.passed)
    assert interval is not None  # both sides have jobs
    excludes_zero = interval[0] > 0 or interval[1] < 0
    if p_value < alpha and excludes_zero:
        verdict = IMPROVEMENT if difference > 0 else REGRESSION
    else:
        verdict = NO_CHANGE
    return RowDiff(task, variant, base, new, difference, interval, p_value, verdict)


@dataclass(frozen=True)
class BatchDiff:
    base: Side
    new: Side
    alpha: float
    cells: tuple[RowDiff, ...]
    variants: tuple[RowDiff, ...]
    overall: RowDiff
    only_base: tuple[tuple[str, str], ...]
    only_new: tuple[tuple[str, str], ...]

    @property
    def rule(self) -> str:
        return rule_text(self.alpha)

    @property
    def rows(self) -> tuple[RowDiff, ...]:
        return (*self.cells, *self.variants, self.overall)

    @property
    def regressions(self) -> tuple[RowDiff, ...]:
        return tuple(r for r in self.rows if r.verdict == REGRESSION)

    @property
    def verdict_first(self) -> tuple[RowDiff, ...]:
        """Every row, the regressions first (what a reader of a nightly looks for), then the rest
        in their usual order (cells, variants, all)."""
        return (*self.regressions, *(r for r in self.rows if r.verdict != REGRESSION))

    @property
    def improvements(self) -> tuple[RowDiff, ...]:
        return tuple(r for r in self.rows if r.verdict == IMPROVEMENT)

    @property
    def has_rewards(self) -> bool:
        """A verifier graded jobs on either side: the mean reward gets a column."""
        return self.overall.base.rewarded > 0 or self.overall.new.rewarded > 0

    def headline(self) -> str:
        """e.g. `1 regression, 0 improvements, 3 no change (2 cells only in the baseline)`."""
        counts = {
            v: sum(r.verdict == v for r in self.cells) for v in (REGRESSION, IMPROVEMENT, NO_CHANGE, NO_DATA)
        }
        text = (
            f"{counts[REGRESSION]} regression{'s' * (counts[REGRESSION] != 1)}, "
            f"{counts[IMPROVEMENT]} improvement{'s' * (counts[IMPROVEMENT] != 1)}, "
            f"{counts[NO_CHANGE]} no change"
        )
        if counts[NO_DATA]:
            text += f", {counts[NO_DATA]} no data"
        text += f" over {len(self.cells)} shared cell{'s' * (len(self.cells) != 1)}"
        pooled = [r for r in (*self.variants, self.overall) if r.verdict in (REGRESSION, IMPROVEMENT)]
        if pooled:
            text += "; pooled: " + ", ".join(f"{r.name} {r.verdict}" for r in pooled)
        extra = [
            f"{len(self.only_base)} only in the baseline" if self.only_base else "",
            f"{len(self.only_new)} only in the new batch" if self.only_new else "",
        ]
        extra = [e for e in extra if e]
        return text + (f" ({', '.join(extra)})" if extra else "")

    def to_document(self) -> dict[str, Any]:
        def side(s: Side) -> dict[str, Any]:
            return {
                "label": s.label,
                "source": s.source,
                "gateway": s.gateway_label,
                "generated_at": s.generated_at,
            }

        return {
            "format": COMPARISON_FORMAT,
            "base": side(self.base),
            "new": side(self.new),
            "alpha": self.alpha,
            "rule": self.rule,
            "regressions": len(self.regressions),
            "improvements": len(self.improvements),
            "cells": [r.to_dict() for r in self.cells],
            "variants": [r.to_dict() for r in self.variants],
            "overall": self.overall.to_dict(),
            "only_in_base": [{"task": t, "variant": v} for t, v in self.only_base],
            "only_in_new": [{"task": t, "variant": v} for t, v in self.only_new],
        }


def diff_sides(base: Side, new: Side, *, alpha: float = 0.05) -> BatchDiff:
    """Compare `new` against `base` (the baseline)."""
    base_cells = _by_cell(base.jobs)
    new_cells = _by_cell(new.jobs)
    shared = [key for key in new_cells if key in base_cells]  # the new batch's order
    cells = tuple(
        row_diff(t, v, side_stats(base_cells[(t, v)]), side_stats(new_cells[(t, v)]), alpha)
        for t, v in shared
    )
    # Per-variant rows pool several tasks; with one task they would repeat the cells.
    variants = tuple(dict.fromkeys(v for _, v in shared)) if len({t for t, _ in shared}) > 1 else ()
    per_variant = tuple(
        row_diff(
            None,
            variant,
            side_stats(r for key in shared if key[1] == variant for r in base_cells[key]),
            side_stats(r for key in shared if key[1] == variant for r in new_cells[key]),
            alpha,
        )
        for variant in variants
    )
    overall = row_diff(
        None,
        None,
        side_stats(r for key in shared for r in base_cells[key]),
        side_stats(r for key in shared for r in new_cells[key]),
        alpha,
    )
    return BatchDiff(
        base=base,
        new=new,
        alpha=alpha,
        cells=cells,
        variants=per_variant,
        overall=overall,
        only_base=tuple(key for key in base_cells if key not in new_cells),
        only_new=tuple(key for key in new_cells if key not in base_cells),
    )


def _by_cell(rows: Iterable[JobRow]) -> dict[tuple[str, str], list[JobRow]]:
    cells: dict[tuple[str, str], list[JobRow]] = {}
    for row in rows:
        cells.setdefault((row.task, row.variant), []).append(row)
    return cells
