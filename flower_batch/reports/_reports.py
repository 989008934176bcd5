"""Write every machine-readable output of a batch at once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from ._html import write_html
from ._junit import write_junit
from ._results import BatchResults, write_results_json
from .text_budget import fit_texts


class ReportPaths(NamedTuple):
    results_json: Path
    junit_xml: Path
    html: Path


def write_reports(results: BatchResults, out_dir: Path, html_sections: Sequence[str] = ()) -> ReportPaths:
    """results.json, junit.xml and report.html in `out_dir` (created if needed); `html_sections`
    open report.html, before its table (the baseline comparison: the verdict).

    All three carry the same texts, each job's log tail and check output cut to the batch's
    text budget (see text_budget.py), so the HTML's embedded document stays equal to results.json.
    """
    results = fit_texts(results)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return ReportPaths(
        write_results_json(results, out_dir / "results.json"),
        write_junit(results, out_dir / "junit.xml"),
        write_html(results, out_dir / "report.html", html_sections),
    )
