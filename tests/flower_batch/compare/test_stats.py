"""Newcombe's interval and Fisher's exact test against published values and an independent
exact (rational) enumeration, plus the edge cases a nightly meets: empty sides, all-pass."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from flower_batch.compare.stats import fisher_exact, newcombe_interval, z_for


def _fisher_by_enumeration(a: int, b: int, c: int, d: int) -> Fraction:
    """Two-sided p with exact rationals: every table with the observed margins, summed when at most
    as likely as the observed one. No logarithms, no tolerance: a different computation."""
    r1, r2, c1 = a + b, c + d, a + c
    total = math.comb(r1 + r2, c1)

    def prob(k: int) -> Fraction:
        return Fraction(math.comb(r1, k) * math.comb(r2, c1 - k), total)

    observed = prob(a)
    return sum((prob(k) for k in range(max(0, c1 - r2), min(c1, r1) + 1) if prob(k) <= observed), Fraction(0))


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ((3, 1, 1, 3), 0.4857142857),  # Fisher's lady tasting tea; scipy.stats.fisher_exact gives 0.48571...
        ((8, 2, 1, 5), 0.0349650350),  # scipy docs' example table
        ((1, 9, 11, 3), 0.0027594562),  # Wikipedia's worked example (two-tailed)
        ((5, 0, 0, 5), 2 / 252),  # only the two extreme tables are as unlikely: 2 / C(10, 5)
        ((10, 0, 2, 8), 90 / 125970),  # a nightly's 10/10 -> 2/10: k=10 and k=2, 45 each of C(20, 12)
        ((7, 3, 7, 3), 1.0),  # identical sides
    ],
)
def test_fisher_matches_known_values(table: tuple[int, int, int, int], expected: float) -> None:
    assert fisher_exact(*table) == pytest.approx(expected, rel=1e-7)


def test_fisher_matches_exact_enumeration_on_every_small_table() -> None:
    for a, b, c, d in itertools.product(range(6), repeat=4):
        assert fisher_exact(a, b, c, d) == pytest.approx(
            float(_fisher_by_enumeration(a, b, c, d)), rel=1e-9, abs=1e-12
        )


def test_fisher_is_symmetric_and_degenerate_tables_give_one() -> None:
    assert fisher_exact(2, 7, 9, 1) == pytest.approx(fisher_exact(9, 1, 2, 7))  # sides swapped
    assert fisher_exact(2, 7, 9, 1) == pytest.approx(fisher_exact(2, 9, 7, 1))  # transposed
    assert fisher_exact(0, 0, 0, 0) == 1.0  # both sides empty
    assert fisher_exact(0, 0, 4, 2) == 1.0  # one side empty (0/0)
    assert fisher_exact(10, 0, 10, 0) == 1.0  # all pass on both sides
    assert fisher_exact(0, 6, 0, 9) == 1.0  # all fail on both sides
    with pytest.raises(ValueError, match="negative"):
        fisher_exact(-1, 2, 3, 4)


def test_fisher_stays_exact_for_large_cells() -> None:
    # log-factorials: a 2000-job comparison neither overflows nor loses the tail
    p = fisher_exact(900, 100, 850, 150)
    assert 0 < p < 0.01
    assert 0 <= fisher_exact(1000, 0, 0, 1000) < 1e-300  # 2 / C(2000, 1000)


# Newcombe (1998), Statistics in Medicine 17:873-890, table II, method 10 (hybrid score, no
# continuity correction), for p1 - p2 at 95%.
@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ((56, 70, 48, 80), (0.0524, 0.3339)),
        ((9, 10, 3, 10), (0.1705, 0.8090)),
        ((6, 7, 2, 7), (0.0582, 0.8062)),
        ((5, 56, 0, 29), (-0.0381, 0.1926)),
        ((0, 10, 0, 20), (-0.1611, 0.2775)),
        ((10, 10, 0, 20), (0.6791, 1.0000)),
    ],
)
def test_newcombe_matches_the_published_table(
    counts: tuple[int, int, int, int], expected: tuple[float, float]
) -> None:
    low, high = newcombe_interval(*counts)  # type: ignore[misc]
    assert (round(low, 4), round(high, 4)) == expected


def test_newcombe_edge_cases() -> None:
    assert newcombe_interval(0, 0, 3, 5) is None  # no jobs on the new side
    assert newcombe_interval(3, 5, 0, 0) is None
    low, high = newcombe_interval(10, 10, 10, 10)  # type: ignore[misc]  # all pass, both sides
    assert -1 < low < 0 < high < 1 and low == pytest.approx(-high)
    low, high = newcombe_interval(0, 30, 30, 30)  # type: ignore[misc]  # the largest possible drop
    assert low >= -1 and high < -0.8
    for x1, n1, x2, n2 in itertools.product(range(4), range(1, 4), range(4), range(1, 4)):
        if x1 <= n1 and x2 <= n2:
            low, high = newcombe_interval(x1, n1, x2, n2)  # type: ignore[misc]
            assert -1 <= low <= x1 / n1 - x2 / n2 <= high <= 1


def test_the_level_follows_alpha() -> None:
    assert z_for(0.05) == pytest.approx(1.959963984540054)
    wide = newcombe_interval(8, 10, 5, 10, alpha=0.01)
    narrow = newcombe_interval(8, 10, 5, 10, alpha=0.2)
    assert wide and narrow and wide[0] < narrow[0] and wide[1] > narrow[1]
    for bad in (0, 1, -0.1, 1.5):
        with pytest.raises(ValueError, match="alpha"):
            z_for(bad)
