"""The Docker labels on everything flower-batch makes (labels.py)."""

from __future__ import annotations

from flower_batch.jobsfile import slugify, value_label


def test_labels():
    assert slugify("Claude Sonnet 4.5!") == "claude-sonnet-4-5"
    assert value_label("model", "claude-sonnet-4-5") == "claude-sonnet-4-5"
    assert value_label("temperature", 0.2) == "temperature-0-2"
    assert value_label("verbose", True) == "verbose" and value_label("verbose", False) == "no-verbose"
    assert value_label("variant", {"name": "Careful One", "workflow": "m:a"}) == "careful-one"
    assert value_label("env", {"LEVEL": "high", "N": 3}) == "high-3"
    long_a, long_b = value_label("p", "x" * 100 + "a"), value_label("p", "x" * 100 + "b")
    assert len(long_a) == 40 and long_a != long_b
    assert value_label("p", "!!!") == "p"
