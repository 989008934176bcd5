"""What the gateway knows about a job once its container is gone (host side, no flower import).

The runner asks this for the job's record: the metered cost (which survives a killed container,
unlike the CLI's own total), whether a budget stopped it, and whether its replay diverged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flower_batch.gateway.metering import MeterSummary, read_meter
from flower_batch.gateway.recording import read_state
from flower_batch.jobmodel.modes import parse_mode


@dataclass(frozen=True)
class MeterMark:
    """What a job's meter held when an attempt began: a wake goes on with the job's meter, so
    this attempt's refusals and spend are what came after it."""

    refused: int = 0
    spent_usd: float = 0.0


def meter_mark(logs_dir: Path) -> MeterMark:
    meter = read_meter(Path(logs_dir))
    return MeterMark(meter.refused, meter.spent_usd) if meter is not None else MeterMark()


@dataclass(frozen=True)
class GatewayOutcome:
    meter: MeterSummary | None
    divergence: str | None = None
    mark: MeterMark = MeterMark()

    @property
    def metered(self) -> bool:
        return self.meter is not None

    @property
    def cost_usd(self) -> float | None:
        return None if self.meter is None or self.meter.cost_usd is None else round(self.meter.cost_usd, 6)

    @property
    def over_budget(self) -> bool:
        """A budget refused a request of this attempt (an earlier one's refusal is not this one's)."""
        return bool(self.meter and self.meter.refused > self.mark.refused)

    @property
    def spent_usd(self) -> float:
        """What counts against the job's budget, over every attempt the meter went on through."""
        return self.meter.spent_usd if self.meter else 0.0

    @property
    def budget_reason(self) -> str | None:
        return self.meter.refused_reason if self.meter else None


def gateway_outcome(logs_dir: Path, mode: str, mark: MeterMark | None = None) -> GatewayOutcome:
    """Read the job's meter (and, for a replay, its replay state) from its logs folder."""
    divergence = None
    if (known := parse_mode(mode)) is not None and known.rules.replays:
        state = read_state(logs_dir) or {}
        found = state.get("divergence")
        served, recorded = state.get("served"), state.get("recorded")
        if isinstance(found, dict):
            divergence = str(found.get("message") or "replay diverged")
        elif isinstance(served, int) and isinstance(recorded, int) and served < recorded:
            # The run ended early: the recording holds requests this run never made.
            divergence = f"replay diverged: the run ended after {served} of the {recorded} recorded requests"
    return GatewayOutcome(read_meter(Path(logs_dir)), divergence, mark or MeterMark())
