"""A persistent job at its budget: which cap it reached, the reason its record gives, and the
history of caps and spend its record keeps across wakes. Pure.

A job that is not persistent still ends `budget` (runner.py decides which): nothing here runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .budget import Budget


@dataclass(frozen=True)
class Spend:
    """What was metered and what the caps were when an attempt ended; None = no such cap."""

    job_spent: float
    job_cap: float | None = None
    batch_spent: float = 0.0
    batch_cap: float | None = None

    @property
    def job_cap_reached(self) -> bool:
        return Budget(self.job_cap).reached(self.job_spent)

    @property
    def batch_cap_reached(self) -> bool:
        return Budget(self.batch_cap).reached(self.batch_spent)


def pause_reason(spend: Spend, step: str | None = None) -> str:
    """ "budget reached: spent $X of $Y", naming the cap that was reached (the job's first: it is
    the one `wake --budget-usd` raises) and the step the budget interrupted."""
    during = f"; step {step} interrupted" if step else ""
    if spend.job_cap_reached or not spend.batch_cap_reached:
        cap = "" if spend.job_cap is None else f" of ${spend.job_cap:.4f}"
        return (
            f"budget reached: spent ${spend.job_spent:.4f}{cap}{during} "
            "(`flower-batch wake JOB --budget-usd +N` continues it)"
        )
    return (
        f"batch budget reached: the batch spent ${spend.batch_spent:.4f} of ${spend.batch_cap:.4f}"
        f"{during} (`flower-batch matrix` again with a higher --budget-usd continues it)"
    )


def history_entry(
    *, attempt: int, status: str, spend: Spend, spent_before: float, step: str | None = None
) -> dict[str, Any]:
    """One attempt's line of a record's `budget_history`: its caps, what the job had spent in
    all at its end (the meter goes on across wakes) and what this attempt added."""
    entry: dict[str, Any] = {
        "attempt": attempt,
        "status": status,
        "budget_usd": spend.job_cap,
        "spent_usd": round(spend.job_spent, 6),
        "attempt_usd": round(max(spend.job_spent - spent_before, 0.0), 6),
    }
    if spend.batch_cap is not None:
        entry["batch_budget_usd"] = spend.batch_cap
        entry["batch_spent_usd"] = round(spend.batch_spent, 6)
    if step:
        entry["interrupted_step"] = step
    return entry


def read_history(value: object) -> tuple[dict[str, Any], ...]:
    """A record's `budget_history` as stored: its object entries, others dropped."""
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        return ()
    return tuple(dict(e) for e in value if isinstance(e, Mapping))
