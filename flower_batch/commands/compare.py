"""`flower-batch compare BASE NEW`, and the baseline half of `matrix --baseline` / `report --baseline`."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.text import Text

from flower.fileio import write_atomic
from flower_batch.commands.common import HOME_OPT, err, fail, home_at, out
from flower_batch.commands.completion import complete_batch
from flower_batch.compare.diff import BatchDiff, diff_sides
from flower_batch.compare.html import comparison_section
from flower_batch.compare.render import diff_markdown, diff_table, one_sided_lines
from flower_batch.compare.sides import Side, load_side, side_from_document
from flower_batch.compare.stats import z_for
from flower_batch.errors import SideError
from flower_batch.layout import Home
from flower_batch.reports import BatchResults

SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
ALPHA_OPT = typer.Option(0.05, "--alpha", help="significance level of the regression/improvement rule")
FAIL_OPT = typer.Option(
    False, "--fail-on-regression", help="exit 1 when any cell, variant or the total regressed"
)


def check_alpha(alpha: float) -> None:
    try:
        z_for(alpha)
    except ValueError as exc:
        fail(f"--alpha: {exc}")


def load_or_exit(ref: str, home: Home, what: str) -> Side:
    """A side, or one line and exit 2 (nothing written)."""
    try:
        return load_side(ref, home)
    except SideError as exc:
        fail(f"{what}: {exc}")
    raise AssertionError("unreachable")


def append_summary(markdown: str) -> Path | None:
    """Append to $GITHUB_STEP_SUMMARY (what a GitHub Actions job page shows); None when not on Actions."""
    target = os.environ.get(SUMMARY_ENV)
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as fh:
        fh.write(markdown + "\n")
    return Path(target)


def print_diff(diff: BatchDiff) -> None:
    out.print(diff_table(diff))
    for line in one_sided_lines(diff):
        out.print(line, markup=False)
    out.print(Text(diff.headline(), style="red" if diff.regressions else "green"))


@dataclass
class Baseline:
    """`--baseline BASE` of matrix/report: read before anything runs, compared once results exist."""

    side: Side
    alpha: float
    diff: BatchDiff | None = None

    def sections(self, results: BatchResults) -> list[str]:
        """The report.html section (compares `results` first)."""
        new = side_from_document(results.to_document(), source=results.batch)
        self.diff = diff_sides(self.side, new, alpha=self.alpha)
        return [comparison_section(self.diff)]

    def finish(self, report_dir: Path) -> None:
        """Print the comparison, keep it next to the report, and add it to the CI job summary."""
        assert self.diff is not None, "sections() first"
        markdown = diff_markdown(self.diff)
        write_atomic(report_dir / "comparison.json", json.dumps(self.diff.to_document(), indent=2) + "\n")
        write_atomic(report_dir / "comparison.md", markdown + "\n")
        print_diff(self.diff)
        summary = append_summary(markdown)
        err.print(f"compare {report_dir / 'comparison.json'}" + (f"\nsummary {summary}" if summary else ""))

    @property
    def regressed(self) -> bool:
        return bool(self.diff and self.diff.regressions)


def baseline_or_exit(ref: str | None, home: Home, alpha: float, fail_on_regression: bool) -> Baseline | None:
    check_alpha(alpha)
    if ref is None:
        if fail_on_regression:
            fail("--fail-on-regression needs --baseline BASE (a batch name or a results.json)")
        return None
    return Baseline(load_or_exit(ref, home, "--baseline"), alpha)


def compare(
    base: str = typer.Argument(
        ...,
        help="the baseline: a batch name, or a results.json (or its folder)",
        autocompletion=complete_batch,
    ),
    new: str = typer.Argument(
        ..., help="the batch to judge: a batch name, or a results.json", autocompletion=complete_batch
    ),
    alpha: float = ALPHA_OPT,
    as_json: bool = typer.Option(False, "--json", help="print the comparison as JSON"),
    markdown: bool = typer.Option(False, "--markdown", help="print the comparison as Markdown"),
    summary: bool = typer.Option(
        False,
        "--summary",
        help=f"also append the Markdown to ${SUMMARY_ENV} (the GitHub Actions job summary)",
    ),
    fail_on_regression: bool = FAIL_OPT,
    home: Path | None = HOME_OPT,
) -> None:
    """Compare two batches cell by cell: pass rates, their difference, Fisher p, cost/turn/duration deltas."""
    check_alpha(alpha)
    if as_json and markdown:
        fail("--json and --markdown: choose one")
    if summary and not os.environ.get(SUMMARY_ENV):
        fail(
            f"--summary: {SUMMARY_ENV} is not set (GitHub Actions sets it); use --markdown to print the Markdown"
        )
    h = home_at(home)
    diff = diff_sides(load_or_exit(base, h, "BASE"), load_or_exit(new, h, "NEW"), alpha=alpha)
    if as_json:
        typer.echo(json.dumps(diff.to_document(), indent=2, ensure_ascii=False))
    elif markdown:
        typer.echo(diff_markdown(diff))
    else:
        print_diff(diff)
    if summary:
        append_summary(diff_markdown(diff))
    raise typer.Exit(1 if fail_on_regression and diff.regressions else 0)
