"""The price table the gateway meters with: USD per million tokens, per model.

Source: the model catalog baked into the bundled Claude Code CLI 2.1.327 (the one the runtime
image ships), i.e. the very numbers the CLI itself uses for `total_cost_usd`, so the gateway's
cost and the CLI's agree. Documented in docs/gateway.md; update both when the image's CLI moves.

A model is matched by its id, its dated first-party id (e.g. claude-sonnet-4-5-20250929) or any
id that starts with a known id followed by "-<date>" or "[...]" (e.g. "claude-opus-4-6[1m]").
An unknown model has no price: its tokens are still metered, its cost is None ("unknown").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    """USD per million tokens. `long_*` apply above `long_above` prompt tokens, when set."""

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    long_above: int | None = None
    long: Price | None = None


def _tier(
    i: float, o: float, w5: float, w1: float, r: float, long: Price | None = None, above: int | None = None
) -> Price:
    return Price(i, o, w5, w1, r, above, long)


TIERS: dict[str, Price] = {
    "tier_2_10": _tier(2, 10, 2.5, 4, 0.2),
    "tier_2_10_cache_read_0_10": _tier(2, 10, 2.5, 4, 0.1),
    "tier_3_15": _tier(3, 15, 3.75, 6, 0.3),
    "tier_4_20_cache_read_0_20": _tier(4, 20, 5, 8, 0.2),
    "tier_5_25": _tier(5, 25, 6.25, 10, 0.5),
    "tier_8_40_cache_read_0_20": _tier(8, 40, 10, 16, 0.2),
    "tier_10_50": _tier(10, 50, 12.5, 20, 1),
    "tier_10_50_cache_read_0_25": _tier(10, 50, 12.5, 20, 0.25),
    "tier_15_75": _tier(15, 75, 18.75, 30, 1.5),
    "haiku_35": _tier(0.8, 4, 1, 1.6, 0.08),
    "haiku_45": _tier(1, 5, 1.25, 2, 0.1),
    "haiku_55": _tier(0.1, 0.5, 0.125, 0.2, 0.01, long=_tier(0.5, 2.5, 0.625, 1, 0.05), above=100_000),
}

# model id -> (tier, dated first-party id or None)
MODELS: dict[str, tuple[str, str | None]] = {
    "claude-3-5-haiku": ("haiku_35", "claude-3-5-haiku-20241022"),
    "claude-haiku-4-5": ("haiku_45", "claude-haiku-4-5-20251001"),
    "claude-haiku-5-5": ("haiku_55", None),
    "claude-3-5-sonnet": ("tier_3_15", "claude-3-5-sonnet-20241022"),
    "claude-3-7-sonnet": ("tier_3_15", "claude-3-7-sonnet-20250219"),
    "claude-sonnet-4-0": ("tier_3_15", "claude-sonnet-4-20250514"),
    "claude-sonnet-4-5": ("tier_3_15", "claude-sonnet-4-5-20250929"),
    "claude-sonnet-4-6": ("tier_3_15", None),
    "claude-sonnet-5": ("tier_2_10", None),
    "claude-sonnet-5-5": ("tier_2_10_cache_read_0_10", None),
    "claude-opus-4-0": ("tier_15_75", "claude-opus-4-20250514"),
    "claude-opus-4-1": ("tier_15_75", "claude-opus-4-1-20250805"),
    "claude-opus-4-5": ("tier_5_25", "claude-opus-4-5-20251101"),
    "claude-opus-4-6": ("tier_5_25", None),
    "claude-opus-4-7": ("tier_5_25", None),
    "claude-opus-4-8": ("tier_5_25", None),
    "claude-opus-5": ("tier_5_25", None),
    "claude-opus-5-5": ("tier_4_20_cache_read_0_20", None),
    "claude-fable-5": ("tier_10_50", None),
    "claude-fable-5-1": ("tier_10_50_cache_read_0_25", None),
    "claude-fable-5-2": ("tier_8_40_cache_read_0_20", None),
    "claude-mythos-5": ("tier_10_50", None),
    "claude-mythos-5-1": ("tier_10_50_cache_read_0_25", None),
    "claude-mythos-5-2": ("tier_8_40_cache_read_0_20", None),
}

_BY_ID: dict[str, Price] = {}
for _id, (_tier_name, _dated) in MODELS.items():
    _BY_ID[_id] = TIERS[_tier_name]
    if _dated:
        _BY_ID[_dated] = TIERS[_tier_name]
_SUFFIX = re.compile(r"^(?:-\d{8}|\[[^\]]*\])+$")  # "-20250929", "[1m]"


def price_for(model: str) -> Price | None:
    """The price of `model`, or None when the table does not know it."""
    model = (model or "").strip().lower()
    if model in _BY_ID:
        return _BY_ID[model]
    for known in sorted(_BY_ID, key=len, reverse=True):  # longest first: opus-4-5 before opus-4
        if model.startswith(known) and _SUFFIX.match(model[len(known) :]):
            return _BY_ID[known]
    return None


TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _n(usage: Mapping[str, object], key: str) -> int:
    value = usage.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def cost_usd(model: str, usage: Mapping[str, object]) -> float | None:
    """Cost of one response's `usage` (Messages-API field names); None for an unknown model.

    Cache writes are split into 5-minute and 1-hour writes when the usage says so
    (`cache_creation.ephemeral_1h_input_tokens`); otherwise all count as 5-minute writes.
    """
    price = price_for(model)
    if price is None:
        return None
    inp, out = _n(usage, "input_tokens"), _n(usage, "output_tokens")
    read, write = _n(usage, "cache_read_input_tokens"), _n(usage, "cache_creation_input_tokens")
    split = usage.get("cache_creation")
    write_1h = _n(split, "ephemeral_1h_input_tokens") if isinstance(split, Mapping) else 0
    write_1h = min(write_1h, write)
    if price.long is not None and price.long_above is not None and inp + read + write > price.long_above:
        price = price.long
    total = (
        inp * price.input
        + out * price.output
        + read * price.cache_read
        + (write - write_1h) * price.cache_write_5m
        + write_1h * price.cache_write_1h
    )
    return total / 1_000_000
