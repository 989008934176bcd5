"""A batch's records -> its reports: results.json, the comparison table, report.html (with
plots and per-job pages), JUnit XML. Nothing here runs a job.

    BatchResults(...) / results_from_records(...)    the numbers, per task x variant cell
    write_reports(...)                               the four outputs, in one call
    log_tails(batch_dir, job_ids)                    each job's log tail, read as hostile input
    pass_rate_svg(...) / cost_vs_pass_svg(...)       the report's two inline plots

The text budget of a report (log tails and check output) is in text_budget.py.
"""

from ._html import html_report, write_html
from ._junit import junit_xml, write_junit
from ._plots import cost_vs_pass_svg, pass_rate_svg
from ._reports import ReportPaths, write_reports
from ._results import RESULTS_FORMAT, BatchResults, log_tails, results_from_records, write_results_json
from ._stats import Cell, Comparison, compare, wilson_interval
from ._table import comparison_table, summary_line

__all__ = [
    "RESULTS_FORMAT",
    "BatchResults",
    "Cell",
    "Comparison",
    "ReportPaths",
    "compare",
    "comparison_table",
    "cost_vs_pass_svg",
    "html_report",
    "junit_xml",
    "log_tails",
    "pass_rate_svg",
    "results_from_records",
    "summary_line",
    "wilson_interval",
    "write_html",
    "write_junit",
    "write_reports",
    "write_results_json",
]
