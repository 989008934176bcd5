"""Now, as the project writes it down: UTC in ISO 8601. To the second in what people read (job
records, runs/.exit.json, the gateway's deaths, a matrix's progress); to the millisecond in
flower's manifest, whose step durations are computed from it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal


def now_iso(timespec: Literal["seconds", "milliseconds"] = "seconds") -> str:
    """ "2026-12-01T12:36:31+00:00", or with "milliseconds" "2026-12-01T12:36:31.123+00:00"."""
    return datetime.now(UTC).isoformat(timespec=timespec)
