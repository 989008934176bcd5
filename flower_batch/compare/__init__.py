"""Comparing a batch with a baseline (`flower-batch compare`, `matrix --baseline`).

    sides.py   a results.json (or a batch's) read back into per-job rows
    stats.py   Newcombe's interval for a difference of proportions, Fisher's exact test
    diff.py    BatchDiff: per cell, per variant, overall; the regression rule
    render.py  the terminal table and the Markdown ($GITHUB_STEP_SUMMARY)
    html.py    the comparison section of report.html
"""

from flower_batch.errors import SideError

from .diff import (
    COMPARISON_FORMAT,
    IMPROVEMENT,
    NO_CHANGE,
    NO_DATA,
    REGRESSION,
    BatchDiff,
    RowDiff,
    diff_sides,
)
from .sides import Side, load_side, side_from_document
from .stats import fisher_exact, newcombe_interval

__all__ = [
    "COMPARISON_FORMAT",
    "IMPROVEMENT",
    "NO_CHANGE",
    "NO_DATA",
    "REGRESSION",
    "BatchDiff",
    "RowDiff",
    "Side",
    "SideError",
    "diff_sides",
    "fisher_exact",
    "load_side",
    "newcombe_interval",
    "side_from_document",
]
