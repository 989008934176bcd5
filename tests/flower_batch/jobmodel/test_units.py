"""Durations and memory sizes (jobmodel/units.py): parsed, refused, shown."""

from __future__ import annotations

import pytest

from flower_batch.jobmodel.units import format_duration, parse_duration, parse_memory


@pytest.mark.parametrize(
    "text, seconds",
    [
        (90, 90.0),
        (1.5, 1.5),
        ("45", 45.0),
        ("90s", 90.0),
        ("10m", 600.0),
        ("1h30m", 5400.0),
        ("1h 30m", 5400.0),
        ("1.5h", 5400.0),
        ("500ms", 0.5),
        ("2d", 172800.0),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["ten", "", "10 minutes", "m10", 0, -5, True, "0s", None, "10m x"])
def test_bad_durations(text):
    assert parse_duration(text) is None


@pytest.mark.parametrize(
    "text, size",
    [
        (1048576, 1048576),
        ("512m", 512 * 1024**2),
        ("2g", 2 * 1024**3),
        ("1.5GiB", int(1.5 * 1024**3)),
        ("64MB", 64 * 1024**2),
        ("100k", 102400),
        ("4096", 4096),
    ],
)
def test_memory(text, size):
    assert parse_memory(text) == size


@pytest.mark.parametrize("text", ["lots", "", "-1g", 0, True, "2 gigs"])
def test_bad_memory(text):
    assert parse_memory(text) is None


def test_format_duration():
    assert [format_duration(s) for s in (None, 0.42, 12.4, 185, 3725)] == [
        "?",
        "0.4s",
        "12s",
        "3m05s",
        "1h02m",
    ]
