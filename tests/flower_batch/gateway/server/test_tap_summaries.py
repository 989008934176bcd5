"""A request's budget check reads its own job's meter, and every job's only for a batch budget:
summing all of them for each request made the gateway's CPU per request grow with the batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from flower.scripted import ParsedRequest, ResponsePlan
from flower_batch.gateway.budget import Budgets
from flower_batch.gateway.metering import JobMeter
from flower_batch.gateway.server.tap import Tap
from flower_batch.jobmodel.modes import GatewayMode


class _NoAnswer:
    """The mode's responder: these tests stop at the budget check."""

    def respond(self, request: ParsedRequest) -> ResponsePlan:
        raise AssertionError("not asked")


def _tap(tmp_path: Path, batch_budget_usd: float | None, jobs: int) -> Tap:
    batch = tmp_path / "batch"
    tap = Tap(
        _NoAnswer(),
        batch_dir=batch,
        mode=GatewayMode("scripted"),
        budgets=Budgets(batch, batch_budget_usd),
    )
    for i in range(jobs):
        (batch / f"j{i}" / "logs").mkdir(parents=True)
        tap.meter(f"j{i}")
    return tap


def _count_summaries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []
    real = JobMeter.summary

    def counted(self: JobMeter):  # type: ignore[no-untyped-def]
        made.append(self.job)
        return real(self)

    monkeypatch.setattr(JobMeter, "summary", counted)
    return made


def test_without_a_batch_budget_only_the_jobs_own_meter_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tap = _tap(tmp_path, None, jobs=50)
    made = _count_summaries(monkeypatch)
    assert tap.budgets is not None and tap.budgets.refusal("j7", tap.summaries()) is None
    assert made == ["j7"]


def test_with_a_batch_budget_every_meter_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tap = _tap(tmp_path, 1.0, jobs=5)
    made = _count_summaries(monkeypatch)
    assert tap.budgets is not None and tap.budgets.refusal("j1", tap.summaries()) is None
    assert sorted(made) == sorted(["j1", *(f"j{i}" for i in range(5))])
