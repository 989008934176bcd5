"""The two tests a baseline comparison rests on, stdlib only.

    newcombe_interval(x_new, n_new, x_base, n_base)   interval for p_new - p_base
    fisher_exact(a, b, c, d)                           two-sided p-value of a 2x2 table

Newcombe's hybrid score interval (method 10 of Newcombe 1998, "Interval estimation for the
difference between independent proportions") combines the two Wilson score intervals:
    L = d - sqrt((p1 - l1)^2 + (u2 - p2)^2)     U = d + sqrt((u1 - p1)^2 + (p2 - l2)^2)
It stays inside [-1, 1] and behaves at 0/n and n/n, where the Wald interval collapses.

Fisher's exact test conditions on the margins: the top-left count follows a hypergeometric
law, and the two-sided p-value sums the probabilities of every table with the same margins
that is at most as likely as the observed one (the rule scipy.stats.fisher_exact uses,
with the same relative tolerance for ties).
"""

from __future__ import annotations

import math
from statistics import NormalDist

from flower_batch.reports import wilson_interval

# Tables whose probability is within this relative distance of the observed one count as ties
# (floating-point noise must not drop a table that is exactly as likely).
_TIE = 1 + 1e-7


def z_for(alpha: float) -> float:
    """The two-sided normal quantile for confidence 1 - alpha (1.95996... for 0.05)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha {alpha}: give a significance level between 0 and 1, e.g. 0.05")
    return NormalDist().inv_cdf(1 - alpha / 2)


def newcombe_interval(
    x_new: int, n_new: int, x_base: int, n_base: int, *, alpha: float = 0.05
) -> tuple[float, float] | None:
    """Interval for p_new - p_base at confidence 1 - alpha; None when either side has no jobs."""
    z = z_for(alpha)
    new = wilson_interval(x_new, n_new, z)
    base = wilson_interval(x_base, n_base, z)
    if new is None or base is None:
        return None
    p1, p2 = x_new / n_new, x_base / n_base
    (l1, u1), (l2, u2) = new, base
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return max(-1.0, low), min(1.0, high)


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided Fisher exact p-value of [[a, b], [c, d]] (rows: the two sides; cols: pass, fail).

    An empty row or column leaves one possible table: p = 1.
    """
    if min(a, b, c, d) < 0:
        raise ValueError(f"table [[{a}, {b}], [{c}, {d}]]: counts cannot be negative")
    row1, row2, col1 = a + b, c + d, a + c
    n = row1 + row2
    low, high = max(0, col1 - row2), min(col1, row1)
    denominator = _log_choose(n, col1)

    def log_p(k: int) -> float:
        return _log_choose(row1, k) + _log_choose(row2, col1 - k) - denominator

    observed = log_p(a)
    threshold = observed + math.log(_TIE)
    total = sum(math.exp(lp) for k in range(low, high + 1) if (lp := log_p(k)) <= threshold)
    return min(1.0, total)
