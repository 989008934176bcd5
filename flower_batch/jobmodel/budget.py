"""The budget: one cap of US dollars, and the one answer to "is it reached?".

A job has a cap of its own (`budget_usd` in its spec: jobs.toml, `run --budget-usd`) and may be
one of a batch with a cap of its own (`[batch].budget_usd`, `matrix --budget-usd`). Both are a
`Budget`; the gateway (before it forwards a request), the scheduler (before it starts or wakes
a job), the runner (when it decides that a persistent job pauses) and `wake` (a new cap or +N)
all ask it, so what "reached" means is decided here and only here.
"""

from __future__ import annotations

from dataclasses import dataclass

from flower_batch.errors import BudgetError


@dataclass(frozen=True)
class BudgetChange:
    """A budget as `wake --budget-usd` takes it: an absolute cap ("0.50"), or "+0.20" to add."""

    amount: float
    added: bool = False

    def applied(self, cap: float | None, spent: float) -> float:
        """The new cap: the amount, or the amount on top of the current cap (of what was spent
        when there was none: a job paused by its batch's budget)."""
        if not self.added:
            return self.amount
        return round((cap if cap is not None else spent) + self.amount, 6)


@dataclass(frozen=True)
class Budget:
    """A cap of US dollars; None: no cap (never reached)."""

    cap: float | None = None

    def reached(self, spent: float) -> bool:
        return self.cap is not None and spent >= self.cap

    def describe(self) -> str:
        return "none" if self.cap is None else f"${self.cap:.4f}"

    def for_wake(self, spent: float, change: BudgetChange | None, *, job: str, given: str = "") -> Budget:
        """The cap a woken job runs under: `change` applied to this one; without a change, this
        one, refused when already reached (the job would only pause again at its first request).
        Raises BudgetError (one line naming the job and the fix)."""
        if change is not None:
            new = Budget(change.applied(self.cap, spent))
            if new.reached(spent):
                raise BudgetError(
                    f"--budget-usd {given}: job {job} has spent ${spent:.4f} already; give a cap above "
                    f"that (or +N to add N to its cap)"
                )
            return new
        if self.reached(spent):
            raise BudgetError(
                f"job {job} is at its budget (spent ${spent:.4f} of {self.describe()}); "
                "wake it with --budget-usd +N to add N dollars"
            )
        return self
