"""Comparison stats and the four outputs (table, results.json, JUnit, HTML) agreeing; the HTML's
two inline SVG plots, and the text budget that keeps a large batch's report small."""

from __future__ import annotations

import json
import re
import textwrap
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from lxml import etree
from rich.console import Console

from flower_batch.jobmodel.outcome import JobOutcome, StepSummary, decide_status
from flower_batch.jobmodel.record import new_record, record_path, write_record
from flower_batch.jobmodel.status import Status
from flower_batch.jobsfile import load_jobs_file
from flower_batch.reports import (
    BatchResults,
    compare,
    comparison_table,
    cost_vs_pass_svg,
    html_report,
    junit_xml,
    pass_rate_svg,
    results_from_records,
    summary_line,
    wilson_interval,
    write_reports,
)

JOBS = """
[defaults]
workflow = "examples.workflows:${{ matrix.variant }}"
[tasks.hello]
workspace = "tasks/hello"
prompt = "say hi </script><script>alert(1)</script>"
check = "grep -q hi hello.txt"
[tasks.fizz]
workspace = "tasks/fizz"
prompt = "fizzbuzz"
network = "internet"
[matrix]
variant = ["careful", "quick"]
repeat = 3
exclude = [{ task = "fizz", variant = "quick" }]
"""

# (status, cost, turns, duration) per job id; fizz.quick is excluded, hello.quick.r3 is pending.
PLAN = {
    "hello.careful.r1": (Status.PASSED, 0.02, 4, 10.0),
    "hello.careful.r2": (Status.PASSED, 0.04, 6, 20.0),
    "hello.careful.r3": (Status.FAILED, None, 5, 30.0),
    "hello.quick.r1": (Status.TIMEOUT, 0.01, 2, 300.0),
    "hello.quick.r2": (Status.SKIPPED, None, None, None),
    "fizz.careful.r1": (Status.ERROR, None, None, 1.0),
    "fizz.careful.r2": (Status.BUDGET, 0.5, 40, 100.0),
    "fizz.careful.r3": (Status.PASSED, 0.1, 9, 50.0),
}


@pytest.fixture
def results(tmp_path) -> BatchResults:
    for task in ("hello", "fizz"):
        (tmp_path / "tasks" / task).mkdir(parents=True)
    (tmp_path / "jobs.toml").write_text(textwrap.dedent(JOBS))
    jobs = load_jobs_file(tmp_path / "jobs.toml").jobs
    outcomes = {}
    for job_id, (status, cost, turns, duration) in PLAN.items():
        outcomes[job_id] = JobOutcome(
            job_id,
            status,
            workflow_ok=status is not Status.ERROR,
            check_exit=1 if status is Status.FAILED else 0,
            cost_usd=cost,
            num_turns=turns,
            duration_s=duration,
            steps=(
                StepSummary(
                    "work",
                    status is Status.PASSED,
                    cost,
                    turns,
                    duration,
                    verdict="pass" if status is Status.PASSED else None,
                ),
            ),
            gateway_mode="scripted",
            reason=None if status is Status.PASSED else f"{status.value} <&> \x1b[31mbecause\x1b[0m\x00",
            check_output="hello.txt: hi" if job_id.startswith("hello") else None,
            log_tail="last line of the log",
        )
    return BatchResults(
        "demo", jobs, outcomes, image_id="sha256:" + "a" * 64, generated_at="2026-01-02T03:04:05Z"
    )


def test_wilson_interval():
    assert wilson_interval(0, 0) is None
    low, high = wilson_interval(2, 2)
    assert round(low, 4) == 0.3424 and high == 1.0
    low, high = wilson_interval(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)
    low, high = wilson_interval(0, 3)
    assert low == 0.0 and round(high, 4) == 0.5615


def test_decide_status():
    assert decide_status(workflow_ok=True, check_exit=0) == (Status.PASSED, None)
    assert decide_status(workflow_ok=True, check_exit=None) == (Status.PASSED, None)
    assert decide_status(workflow_ok=True, check_exit=2) == (Status.FAILED, "check exited 2")
    assert decide_status(workflow_ok=False, check_exit=0)[0] is Status.FAILED
    assert decide_status(workflow_ok=None, check_exit=None)[0] is Status.ERROR
    assert decide_status(workflow_ok=True, check_exit=0, timed_out=True)[0] is Status.TIMEOUT
    assert decide_status(workflow_ok=None, check_exit=None, over_budget=True)[0] is Status.BUDGET
    assert decide_status(workflow_ok=True, check_exit=0, error="image missing") == (
        Status.ERROR,
        "image missing",
    )


def test_comparison_cells(results):
    c = results.comparison
    assert c.tasks == ("hello", "fizz") and c.variants == ("careful", "quick")
    assert c.cell("fizz", "quick") is None  # excluded
    hello_careful = c.cell("hello", "careful")
    assert (hello_careful.passed, hello_careful.n, hello_careful.pending) == (2, 3, 0)
    assert hello_careful.mean_cost_usd == pytest.approx(0.03) and hello_careful.cost_known == 2
    assert hello_careful.mean_turns == 5 and hello_careful.mean_duration_s == 20
    hello_quick = c.cell("hello", "quick")
    assert (hello_quick.passed, hello_quick.n, hello_quick.pending) == (0, 1, 1)  # skipped not counted
    assert hello_quick.statuses == {"skipped": 1, "timeout": 1}
    assert (c.overall.passed, c.overall.n, c.overall.pending) == (3, 7, 1)
    assert c.variant_totals["careful"].n == 6


def _table_rows(results: BatchResults) -> dict[str, list[str]]:
    console = Console(width=240, record=True, color_system=None)
    console.print(comparison_table(results))
    text = console.export_text()
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip("│┃ ").split("│")]
        if cells and cells[0] in ("hello", "fizz", "all tasks"):
            rows[cells[0]] = cells[1:]
    assert "model: scripted model" in text
    return rows


class _ReportParser(HTMLParser):
    def __init__(self):
        super().__init__()
        self.cells, self.jobs, self.data_json, self.banner = [], {}, None, ""
        self._in_data = self._in_banner = False
        self.open_tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag not in ("meta", "input", "br"):
            self.open_tags.append(tag)
        if tag == "td" and "cell" in (attrs.get("class") or "").split():
            self.cells.append(attrs)
        if tag == "details":
            self.jobs[attrs["id"].removeprefix("job-")] = attrs["data-status"]
        self._in_data = attrs.get("id") == "results-data"
        self._in_banner = self._in_banner or attrs.get("id") == "gateway-mode"

    def handle_endtag(self, tag):
        assert self.open_tags and self.open_tags.pop() == tag, f"unbalanced </{tag}>"
        self._in_banner = False

    def handle_data(self, data):
        if self._in_data:
            self.data_json = json.loads(data)
            self._in_data = False
        if self._in_banner:
            self.banner += data


def test_the_four_outputs_agree(results, tmp_path):
    paths = write_reports(results, tmp_path / "out")
    document = json.loads(paths.results_json.read_text())
    c = results.comparison

    # results.json mirrors the comparison and every job's status
    json_cells = {(x["task"], x["variant"]): (x["passed"], x["n"], x["pending"]) for x in document["cells"]}
    assert json_cells == {key: (cell.passed, cell.n, cell.pending) for key, cell in c.cells.items()}
    statuses = {j["id"]: j["status"] for j in document["jobs"]}
    assert statuses == {
        job.id: (PLAN[job.id][0].value if job.id in PLAN else "pending") for job in results.jobs
    }
    assert document["gateway"] == {"modes": ["scripted"], "label": "scripted model"}
    assert document["summary"]["passed"] == 3 and document["summary"]["n"] == 7

    # the terminal table shows the same passed/n per cell
    rows = _table_rows(results)
    for task in c.tasks:
        for index, variant in enumerate(c.variants):
            cell = c.cell(task, variant)
            expected = "—" if cell is None else f"{cell.passed}/{cell.n}"
            assert rows[task][index].startswith(expected)
    assert [cell.split()[0] for cell in rows["all tasks"]] == ["3/6", "0/1"]

    # JUnit: one testcase per job, failures/errors/skipped by status
    root = ET.fromstring(paths.junit_xml.read_text())
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert set(cases) == {job.id for job in results.jobs}
    for job_id, case in cases.items():
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        expected = {
            "passed": [],
            "failed": ["failure"],
            "timeout": ["failure"],
            "budget": ["failure"],
            "error": ["error"],
            "skipped": ["skipped"],
            "pending": ["skipped"],
        }[statuses[job_id]]
        assert kinds == expected, job_id
        assert case.get("classname") == job_id.split(".")[0]
        if kinds and kinds[0] in ("failure", "error"):
            # the type is the failure class, the same results.json gives the job
            classes = {entry["id"]: entry["class"] for entry in document["jobs"]}
            assert case.find(kinds[0]).get("type") == classes[job_id]
    assert root.get("tests") == str(len(results.jobs))
    assert int(root.get("failures")) == sum(s in ("failed", "timeout", "budget") for s in statuses.values())
    assert int(root.get("errors")) == sum(s == "error" for s in statuses.values())
    assert sum(int(s.get("skipped")) for s in root.iter("testsuite")) == sum(
        s in ("skipped", "pending") for s in statuses.values()
    )

    # HTML: same cells, same statuses, the same document embedded
    parser = _ReportParser()
    parser.feed(paths.html.read_text())
    html_cells = {
        (a["data-task"], a["data-variant"]): (int(a["data-passed"]), int(a["data-n"]), int(a["data-pending"]))
        for a in parser.cells
    }
    assert html_cells == json_cells
    assert parser.jobs == statuses
    assert parser.data_json == document
    assert parser.banner == "Model: scripted model"


def test_junit_text_is_clean_xml(results):
    root = ET.fromstring(junit_xml(results))
    failure = next(
        case.find("failure") for case in root.iter("testcase") if case.get("name") == "hello.careful.r3"
    )
    assert failure.get("message") == "failed <&> because\ufffd"
    out = next(
        case.find("system-out") for case in root.iter("testcase") if case.get("name") == "hello.careful.r1"
    )
    assert "$ grep -q hi hello.txt\nhello.txt: hi" in out.text and "last line of the log" in out.text
    properties = {p.get("name"): p.get("value") for p in root.find("testsuite").iter("property")}
    assert properties["gateway_mode"] == "scripted" and properties["image_id"].startswith("sha256:")


def test_html_is_self_contained_and_escaped(results):
    page = html_report(results)
    for forbidden in ("<link", " src=", "@import", "url(", "http://", "https://"):
        assert forbidden not in page
    assert "<script>alert(1)" not in page  # the prompt is escaped everywhere
    # The prompt lives in the embedded document (job bodies are built from it), escaped so it can
    # never close the data block; tests/flower_batch/reports/test_render_in_chromium.py checks how it renders.
    assert "say hi \\u003c/script\\u003e\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in page
    assert page.count("<script") == 2  # the data block and our script


def test_summary_line(results):
    assert summary_line(results) == (
        "3/7 passed (43%) · total $0.6700 (5/7 known) · model: scripted model · 1 pending"
        " · not passed: verifier 1 · infrastructure 1 · timeout 1 · budget 2"
    )


def test_results_rebuilt_from_records_match(results, tmp_path):
    batch = tmp_path / "volumes" / "demo"
    for job in results.jobs:
        record = new_record(job, batch="demo", image_id=results.image_id, status="running")
        outcome = results.outcomes.get(job.id)
        write_record(record_path(batch, job.id), record.with_outcome(outcome) if outcome else record)
    from flower_batch.jobmodel.record import load_records

    records = load_records(batch)
    rebuilt = results_from_records(records, batch="demo", jobs=results.jobs)
    assert rebuilt.comparison == results.comparison
    without_jobs = results_from_records(records, batch="demo")
    assert without_jobs.image_id == results.image_id
    assert {(k, v.passed, v.n) for k, v in without_jobs.comparison.cells.items()} == {
        (k, v.passed, v.n) for k, v in results.comparison.cells.items()
    }


def test_compare_with_nothing_run_yet(results):
    c = compare(results.jobs, {})
    assert c.overall.n == 0 and c.overall.pending == len(results.jobs) and c.overall.ci95 is None
    empty = BatchResults("demo", results.jobs, {})
    assert empty.gateway_label == "Anthropic API"  # configured mode when no outcome exists yet
    assert "0 pending" not in summary_line(empty) and "-" in summary_line(empty)
    html_report(empty)
    ET.fromstring(junit_xml(empty))


def test_write_reports_paths(results, tmp_path):
    paths = write_reports(results, tmp_path / "new" / "dir")
    assert [p.name for p in paths] == ["results.json", "junit.xml", "report.html"]
    assert all(Path(p).stat().st_size > 0 for p in paths)


def test_ci_verdict(results):
    assert not results.ci_passed()
    assert results.ci_passed(fail_under=3 / 9) and not results.ci_passed(fail_under=0.34)  # 3 of 9 jobs
    everything = {j.id: JobOutcome(j.id, Status.PASSED) for j in results.jobs}
    assert BatchResults("demo", results.jobs, everything).ci_passed()
    assert BatchResults("demo", results.jobs, {}).ci_passed(fail_under=0.0)
    assert not BatchResults("demo", [], {}).ci_passed(fail_under=0.0)  # nothing ran is never a pass


def test_plots_are_well_formed_svg_with_the_tables_numbers(results):
    page = html_report(results)
    svgs = re.findall(r"<svg .*?</svg>", page, flags=re.S)
    assert len(svgs) == 2
    totals = results.comparison.variant_totals
    for svg in svgs:
        root = etree.fromstring(svg.encode())  # well-formed XML, not only tolerable HTML
        assert root.tag == "svg" and float(root.get("width")) > 0 and float(root.get("height")) > 0
        groups = root.findall(".//g[@class='variant']")
        by_name = {g.get("data-variant"): g for g in groups}
        for variant, cell in totals.items():
            if variant in by_name:
                g = by_name[variant]
                assert float(g.get("data-rate")) == round(cell.pass_rate or 0, 4)
                ci = g.find("g[@class='ci']")
                low, high = wilson_interval(cell.passed, cell.n)  # type: ignore[misc]
                assert (float(ci.get("data-low")), float(ci.get("data-high"))) == (
                    round(low, 4),
                    round(high, 4),
                )
    bars = etree.fromstring(svgs[0].encode()).findall(".//g[@class='variant']")
    assert [g.get("data-variant") for g in bars] == [v for v, c in totals.items() if c.n]


def test_plot_labels_are_escaped_and_unknown_costs_listed():
    from flower_batch.reports import Cell

    cell = Cell(job_ids=("a",), n=2, passed=1, pending=0, ci95=wilson_interval(1, 2), mean_cost_usd=None)
    svg = cost_vs_pass_svg({"<b>x</b>": cell})
    etree.fromstring(svg.encode())
    assert "<b>" not in svg and "cost unknown: &lt;b&gt;x&lt;/b&gt;" in svg
    assert "<b>" not in pass_rate_svg({"<b>x</b>": cell})


def test_text_budget_keeps_small_reports_whole_and_cuts_large_ones(results, tmp_path):
    import json
    from dataclasses import replace

    from flower_batch.reports import write_reports
    from flower_batch.reports.text_budget import SHORTENED, fit_texts, per_job_limits

    assert fit_texts(results).outcomes == results.outcomes  # a small batch: nothing cut
    log_limit, check_limit = per_job_limits(5000)
    assert log_limit < 4000 and check_limit < 8000 and per_job_limits(10) == (100_000, 150_000)
    long_log = "".join(f"log line {i}\n" for i in range(2000))
    big = replace(
        results,
        outcomes={
            k: replace(o, log_tail=long_log, check_output=long_log) for k, o in results.outcomes.items()
        },
    )
    import flower_batch.reports.text_budget as budget

    saved = budget.TEXT_BUDGET
    budget.TEXT_BUDGET = len(big.jobs) * 3000  # as if the batch were large: 3,000 characters per job
    try:
        paths = write_reports(big, tmp_path / "out")
    finally:
        budget.TEXT_BUDGET = saved
    doc = json.loads(paths.results_json.read_text())
    tails = [j["outcome"]["log_tail"] for j in doc["jobs"] if j["outcome"]]
    assert tails and all(t.startswith(SHORTENED) and t.endswith("log line 1999\n") for t in tails)
    assert all(len(t) == len(SHORTENED) + 3000 * 2 // 5 for t in tails)
    embedded = re.search(r'id="results-data">(.*?)</script>', paths.html.read_text(), flags=re.S)
    assert embedded and json.loads(embedded.group(1)) == doc  # the report embeds exactly results.json


def test_a_job_with_a_route_out_says_so_in_the_report(results) -> None:
    page = html_report(results)
    assert page.count('class="badge net"') == sum(j.network == "internet" for j in results.jobs) == 3
    entries = {j["id"]: j for j in results.to_document()["jobs"]}
    assert (
        entries["fizz.careful.r1"]["network"] == "internet"
        and entries["hello.careful.r1"]["network"] == "gateway"
    )
