"""The baseline section of report.html, opened in headless Chromium with no network."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest

from flower_batch.compare.diff import diff_sides
from flower_batch.compare.html import comparison_section
from flower_batch.compare.sides import side_from_document
from flower_batch.reports import write_html
from tests.compare_fixtures import results_document
from tests.flower_batch.reports.test_render_in_chromium import headless_chromium
from tests.flower_batch.reports.test_results import results  # noqa: F401 — the shared results fixture

# Yesterday against the shared fixture (today): fizz×careful 20/20 -> 1/3 is a regression.
YESTERDAY = {
    ("hello", "careful"): ["passed"] * 3,
    ("fizz", "careful"): ["passed"] * 20,
    ("fizz", "quick"): ["passed"],
}


def _diff(results):  # noqa: F811
    base = side_from_document(results_document("yesterday", YESTERDAY), source="artifact/results.json")
    new = side_from_document(results.to_document(), source=results.batch)
    return diff_sides(base, new)


def test_the_section_holds_every_row_and_the_comparison_document(results) -> None:  # noqa: F811
    diff = _diff(results)
    html = comparison_section(diff)
    rows = re.findall(r'<tr class="(?:cell-diff|pooled)" data-verdict="([^"]+)"', html)
    assert sorted(rows) == sorted(r.verdict for r in diff.rows)
    embedded = re.search(r'<script type="application/json" id="comparison-data">(.*?)</script>', html, re.S)
    assert embedded and json.loads(embedded.group(1)) == json.loads(json.dumps(diff.to_document()))
    assert "only in the baseline: fizz × quick" in unescape(html)


def test_report_html_opens_with_the_verdict_regressions_first(results, tmp_path: Path) -> None:  # noqa: F811
    diff = _diff(results)
    assert diff.regressions and diff.rows[0].verdict != "regression"  # so the order below is the section's
    html = write_html(results, tmp_path / "report.html", [comparison_section(diff)]).read_text()
    main = html[html.index("<main>") :]
    # the verdict line first, then the rows; the batch's own table and plots after them
    assert (
        main.index('id="baseline-verdict"')
        < main.index('id="baseline-table"')
        < main.index('id="comparison"')
    )
    assert main.index('id="baseline"') < main.index("<h2>Plots</h2>") < main.index('id="jobs"')
    rows = re.findall(r'<tr class="(?:cell-diff|pooled)" data-verdict="([^"]+)" data-task="([^"]*)" '
                      r'data-variant="([^"]*)"', html)  # fmt: skip
    verdicts = [v for v, _, _ in rows]
    n = len(diff.regressions)
    assert verdicts[:n] == ["regression"] * n and "regression" not in verdicts[n:]
    # the rest keep their usual order: cells, then variants, then all tasks
    rest = [r for r in diff.rows if r.verdict != "regression"]
    assert [(t, v) for _, t, v in rows[n:]] == [(r.task or "", r.variant or "") for r in rest]


@pytest.mark.slow
def test_report_with_a_baseline_renders_in_headless_chromium(results, tmp_path: Path) -> None:  # noqa: F811
    diff = _diff(results)
    page = write_html(results, tmp_path / "report.html", [comparison_section(diff)])
    dom = headless_chromium("--virtual-time-budget=2000", "--dump-dom", page.as_uri(), cwd=tmp_path).stdout
    assert "Against the baseline yesterday" in dom
    # the page opens with the verdict: the section comes before the table, the plots and the jobs
    assert dom.index('id="baseline"') < dom.index('id="comparison"') < dom.index('id="jobs"')
    for row in diff.rows:
        assert re.search(rf"<th>\s*{re.escape(row.name)}\s*</th>", dom), row.name
    fizz = next(r for r in diff.cells if (r.task, r.variant) == ("fizz", "careful"))
    assert fizz.verdict == "regression"
    assert 'data-verdict="regression" data-task="fizz" data-variant="careful"' in dom
    assert re.search(r'id="baseline-verdict"><span class="v-regression">Regression</span>', dom)
    for job in results.jobs:  # the rest of the report still renders
        assert job.id in dom
