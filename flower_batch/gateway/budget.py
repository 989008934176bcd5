"""Budgets: per job (`budget_usd` in the job's spec) and per batch (`[batch].budget_usd`,
`--budget-usd`), enforced by the gateway before it forwards a request.

The gateway refuses a request once the job's (or the whole batch's) metered spend has reached
its budget, with an Anthropic-shaped 402 `billing_error` and `x-should-retry: false`: the CLI
gives up at once (no retry), shows it as `API Error: 402 … budget …`, and flower's resilience
classifies it as fatal. The request that crosses a budget is not cut short, so a job can
overshoot by at most the responses in flight when it crossed.

The batch's spend is the sum of every job's meter in the batch folder (so several gateways of
one matrix share it); the job's budget is read from its record.json (through the typed record),
which the host writes before the job's container starts and which no container can write.
Whether a cap is reached is the job model's one answer (jobmodel/budget.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ..errors import RecordError
from ..jobmodel.budget import Budget
from ..jobmodel.record import read_record, record_path
from .metering import MeterSummary, read_summary


def job_budget(batch_dir: Path, job: str) -> Budget:
    """The job's own budget, from its record.json (no cap when there is no readable record)."""
    try:
        return Budget(read_record(record_path(batch_dir, job)).budget_usd)
    except (OSError, RecordError):
        return Budget()


def batch_spent(batch_dir: Path, fresher: Mapping[str, MeterSummary] | None = None) -> float:
    """Metered spend of every job in the batch folder; `fresher` overrides some jobs' summaries."""
    fresher = fresher or {}
    total = sum(s.spent_usd for s in fresher.values())
    root = Path(batch_dir)
    if not root.is_dir():
        return total
    for job_dir in root.iterdir():
        if job_dir.name in fresher or not job_dir.is_dir():
            continue
        data = read_summary(job_dir / "logs")
        if data and not data.get("free"):
            value = data.get("cost_known_usd")
            total += float(value) if isinstance(value, int | float) else 0.0
    return total


class Budgets:
    """Decides, per request, whether a job may still spend. Thread-safe."""

    def __init__(
        self,
        batch_dir: Path,
        batch_budget_usd: float | None,
        *,
        rescan_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.batch_dir = Path(batch_dir)
        self.batch_budget_usd = batch_budget_usd
        self.rescan_s = rescan_s
        self.clock = clock
        self._lock = threading.Lock()
        self._job_budgets: dict[str, tuple[float, Budget]] = {}  # job -> (mtime, budget)
        self._others: tuple[float, float] | None = None  # (when, spend of the batch on disk)

    def budget_of(self, job: str) -> Budget:
        path = record_path(self.batch_dir, job)
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return Budget()
        with self._lock:
            cached = self._job_budgets.get(job)
            if cached and cached[0] == mtime:
                return cached[1]
        budget = job_budget(self.batch_dir, job)
        with self._lock:
            self._job_budgets[job] = (mtime, budget)
        return budget

    def refusal(self, job: str, summaries: Mapping[str, MeterSummary]) -> str | None:
        """Why `job` may not send another request, or None. `summaries`: this gateway's jobs."""
        mine = summaries.get(job)
        spent = mine.spent_usd if mine else 0.0
        budget = self.budget_of(job)
        if budget.reached(spent):
            return (
                f"flower-batch gateway: budget exhausted for job {job}: spent ${spent:.4f} of its "
                f"{budget.describe()} budget (budget_usd in jobs.toml, or --budget-usd)"
            )
        batch = Budget(self.batch_budget_usd)
        if batch.cap is not None:
            total = self._batch_total(summaries)
            if batch.reached(total):
                return (
                    f"flower-batch gateway: batch budget exhausted: the batch spent ${total:.4f} of its "
                    f"{batch.describe()} budget ([batch].budget_usd in jobs.toml, or --budget-usd)"
                )
        return None

    def _batch_total(self, summaries: Mapping[str, MeterSummary]) -> float:
        summaries = dict(summaries)  # each made once (the tap's are made when read)
        now = self.clock()
        with self._lock:
            cached = self._others
        if cached is None or now - cached[0] >= self.rescan_s:
            # Other gateways' jobs only change on disk: re-read them at most every rescan_s.
            on_disk = batch_spent(self.batch_dir, summaries)
            mine = sum(s.spent_usd for s in summaries.values())
            cached = (now, on_disk - mine)
            with self._lock:
                self._others = cached
        return cached[1] + sum(s.spent_usd for s in summaries.values())
