"""Matrix combinations with GitHub Actions `include`/`exclude` semantics.

1. The cartesian product of the axes, first axis outermost.
2. `exclude` runs first: a combination is dropped when every key of some exclude entry
   matches it (a partial match is enough).
3. `include` entries run in order. An entry is added to every product combination whose
   values for the entry's *original axis* keys all match; its other keys are added to
   those combinations, and may overwrite keys added by an earlier include, but never an
   original axis value. An entry that matches no combination becomes a new combination
   of its own. New combinations are never matched by later entries.

Values are opaque here; the caller supplies `match(filter_value, combination_value)`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Match = Callable[[Any, Any], bool]


@dataclass
class Combination:
    """One row of the matrix. `include_index` is set when an include entry created it."""

    values: dict[str, Any]
    include_index: int | None = None
    extended_by: list[int] = field(default_factory=list)


def combinations(
    axes: Mapping[str, Sequence[Any]],
    include: Sequence[Mapping[str, Any]] = (),
    exclude: Sequence[Mapping[str, Any]] = (),
    match: Match = lambda a, b: a == b,
) -> list[Combination]:
    product = (
        [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())] if axes else []
    )
    kept = [Combination(c) for c in product if not any(_matches(e, c, match) for e in exclude)]
    added: list[Combination] = []
    for index, entry in enumerate(include):
        axis_keys = {k: v for k, v in entry.items() if k in axes}
        extra = {k: v for k, v in entry.items() if k not in axes}
        hits = [c for c in kept if _matches(axis_keys, c.values, match)]
        for combination in hits:
            combination.values.update(extra)
            combination.extended_by.append(index)
        if not hits:
            added.append(Combination(dict(entry), include_index=index))
    return kept + added


def _matches(entry: Mapping[str, Any], values: Mapping[str, Any], match: Match) -> bool:
    return all(k in values and match(v, values[k]) for k, v in entry.items())
