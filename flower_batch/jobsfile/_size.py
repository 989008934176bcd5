"""How many jobs a parsed jobs.toml makes, counted without building them.

Expanding 200,000 jobs (templates, paths, hashes) takes many seconds; counting the
combinations takes a fraction of that, so a huge matrix is refused before it is expanded.
The count follows `_combos.combinations` exactly (exclude first, then include entries that
match nothing add one combination each), times the repeats, plus the [[jobs]] entries.
"""

from __future__ import annotations

import itertools
import math

from ._parse import Parsed, Val, match

MAX_JOBS = 10_000


def _matches(entry: dict[str, Val], names: tuple[str, ...], values: tuple[Val, ...]) -> bool:
    return all(k in names and match(v, values[names.index(k)]) for k, v in entry.items())


def count_jobs(parsed: Parsed) -> int:
    axes = parsed.axes
    names = tuple(axes)
    product = math.prod(len(v) for v in axes.values()) if axes else 0
    kept = product
    if parsed.exclude and product:
        kept = sum(
            1
            for combo in itertools.product(*axes.values())
            if not any(_matches(e, names, combo) for e in parsed.exclude)
        )
    added = 0
    for entry in parsed.include:
        axis_keys = {k: v for k, v in entry.items() if k in axes}
        hit = kept > 0 and any(
            _matches(axis_keys, names, combo) and not any(_matches(e, names, combo) for e in parsed.exclude)
            for combo in itertools.product(*axes.values())
        )
        added += 0 if hit else 1
    return (kept + added) * parsed.repeat + sum(job.repeat for job in parsed.explicit)


def breakdown(parsed: Parsed) -> str:
    """`task 1 × a 100 × b 100 × repeat 2`: where the count comes from."""
    parts = [f"{name} {len(values)}" for name, values in parsed.axes.items()]
    if parsed.repeat > 1:
        parts.append(f"repeat {parsed.repeat}")
    return " × ".join(parts)
