"""`compare`: two results.json -> per-cell / per-variant / overall rows with the regression rule,
deltas, classes and one-sided cells; the table, --json, --markdown and exit codes of the command."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from flower_batch.cli import app
from flower_batch.compare.diff import IMPROVEMENT, NO_CHANGE, NO_DATA, REGRESSION, diff_sides
from flower_batch.compare.render import diff_markdown, diff_table
from flower_batch.compare.sides import load_side, side_from_document
from flower_batch.compare.stats import fisher_exact
from flower_batch.errors import SideError
from flower_batch.layout import Home
from flower_batch.reports import wilson_interval
from tests.compare_fixtures import BASE_PLAN, NEW_PLAN, results_document, write_document
from tests.flower_batch.reports.test_results import results  # noqa: F401 — the shared results fixture


def _diff(base_plan=BASE_PLAN, new_plan=NEW_PLAN, alpha: float = 0.05):
    base = side_from_document(results_document("nightly-1", base_plan), source="base.json")
    new = side_from_document(results_document("nightly-2", new_plan), source="new.json")
    return diff_sides(base, new, alpha=alpha)


def _row(diff, task, variant):
    return next(r for r in diff.rows if (r.task, r.variant) == (task, variant))


def test_cells_are_marked_regression_improvement_and_no_change() -> None:
    diff = _diff()
    regressed = _row(diff, "hello", "careful")
    assert (regressed.base.passed, regressed.base.n, regressed.new.passed, regressed.new.n) == (10, 10, 2, 10)
    assert regressed.verdict == REGRESSION and regressed.difference == pytest.approx(-0.8)
    assert regressed.p_value == pytest.approx(fisher_exact(2, 8, 10, 0)) and regressed.p_value < 0.001
    assert regressed.interval[1] < 0
    improved = _row(diff, "fizz", "careful")
    assert improved.verdict == IMPROVEMENT and improved.interval[0] > 0  # 1/10 -> 9/10 (the error counts)
    same = _row(diff, "hello", "quick")
    assert (same.new.passed, same.new.n) == (6, 10) and same.verdict == NO_CHANGE and same.p_value > 0.5
    assert [r.name for r in diff.regressions] == ["hello × careful"]


def test_one_sided_cells_are_listed_and_kept_out_of_the_totals() -> None:
    diff = _diff()
    assert diff.only_base == (("fizz", "quick"),) and diff.only_new == (("bye", "careful"),)
    assert {(r.task, r.variant) for r in diff.cells} == {
        ("hello", "careful"),
        ("hello", "quick"),
        ("fizz", "careful"),
    }
    careful = _row(diff, None, "careful")  # hello + fizz only: bye is new, its jobs are not pooled
    assert (careful.base.passed, careful.base.n, careful.new.passed, careful.new.n) == (11, 20, 11, 20)
    assert careful.verdict == NO_CHANGE  # a regression and an improvement cancel out when pooled
    quick = _row(diff, None, "quick")
    assert (quick.base.n, quick.new.n) == (10, 10)  # fizz×quick (baseline only) is not in it
    assert (diff.overall.base.n, diff.overall.new.n) == (30, 30)
    assert "1 only in the baseline, 1 only in the new batch" in diff.headline()


def test_deltas_are_means_per_job_and_classes_are_derived_from_status() -> None:
    diff = _diff()
    row = _row(diff, "hello", "careful")
    assert row.cost_delta == pytest.approx((2 * 0.03 + 8 * 0.05) / 10 - 0.01)
    assert row.turns_delta == pytest.approx((2 * 5 + 8 * 9) / 10 - 3)
    assert row.duration_delta == pytest.approx((2 * 20 + 8 * 40) / 10 - 10)
    # failed jobs split by what failed: odd repeats' workflows failed (agent), even ones' checks (verifier)
    assert row.new.classes == {"agent": 4, "passed": 2, "verifier": 4}
    assert _row(diff, "hello", "quick").new.classes == {"agent": 2, "passed": 6, "timeout": 1, "verifier": 1}
    assert _row(diff, "fizz", "careful").new.classes == {"error": 1, "passed": 9}


def test_a_class_field_in_results_json_is_used_as_given() -> None:
    document = results_document("next", {("t", "v"): ["passed", "failed", "error"]})
    for entry, klass in zip(document["jobs"], ["passed", "verifier", "infrastructure"], strict=True):
        entry["class"] = klass
    side = side_from_document(document, source="next.json")
    assert [j.failure_class for j in side.jobs] == ["passed", "verifier", "infrastructure"]
    diff = diff_sides(side, side)
    assert diff.cells[0].new.classes == {"infrastructure": 1, "passed": 1, "verifier": 1}
    assert "1 infrastructure" in diff_markdown(diff)


def test_skipped_and_pending_jobs_are_not_counted_and_empty_cells_have_no_data() -> None:
    plan = {("bye", "careful"): ["passed", "skipped", "pending"], ("gone", "careful"): ["skipped"]}
    diff = _diff(plan, plan)
    bye = _row(diff, "bye", "careful")
    assert (bye.new.passed, bye.new.n) == (1, 1) and bye.verdict == NO_CHANGE and bye.p_value == 1.0
    gone = _row(diff, "gone", "careful")
    assert gone.new.n == 0 and gone.verdict == NO_DATA and gone.p_value is None and gone.interval is None
    assert "no data" in diff.headline()


def test_all_pass_on_both_sides_is_no_change() -> None:
    plan = {("t", "v"): ["passed"] * 20}
    row = _diff(plan, plan).cells[0]
    assert row.verdict == NO_CHANGE and row.p_value == 1.0 and row.difference == 0
    assert row.interval[0] < 0 < row.interval[1]


def test_alpha_is_the_significance_of_the_rule() -> None:
    base, new = {("t", "v"): ["passed"] * 9 + ["failed"]}, {("t", "v"): ["passed"] * 3 + ["failed"] * 7}
    row = _diff(base, new).cells[0]
    assert 0.01 < row.p_value < 0.05 and row.verdict == REGRESSION  # 9/10 -> 3/10: p = 0.0198
    strict = _diff(base, new, alpha=0.01)
    assert strict.cells[0].verdict == NO_CHANGE  # same data, stricter level
    assert "p < 0.01" in strict.rule and "99%" in strict.rule


def test_both_tests_must_agree_for_a_verdict() -> None:
    # 8/10 -> 3/10: the 95% Newcombe interval excludes 0, but Fisher's p is 0.0698: no change
    base, new = {("t", "v"): ["passed"] * 8 + ["failed"] * 2}, {("t", "v"): ["passed"] * 3 + ["failed"] * 7}
    row = _diff(base, new).cells[0]
    assert row.interval[1] < 0 and row.p_value > 0.05 and row.verdict == NO_CHANGE


def test_the_sides_of_a_real_results_document_count_as_its_own_table(results) -> None:  # noqa: F811
    document = results.to_document()
    side = side_from_document(json.loads(json.dumps(document)), source="results.json")
    diff = diff_sides(side, side)
    for cell in document["cells"]:
        row = _row(diff, cell["task"], cell["variant"])
        assert (row.new.n, row.new.passed) == (cell["n"], cell["passed"])
        assert (
            row.new.mean_cost_usd == pytest.approx(cell["mean_cost_usd"]) if cell["mean_cost_usd"] else True
        )
    for total in document["variant_totals"]:
        row = _row(diff, None, total["variant"])
        assert (row.new.n, row.new.passed) == (total["n"], total["passed"])
    assert (diff.overall.new.n, diff.overall.new.passed) == (
        document["summary"]["n"],
        document["summary"]["passed"],
    )


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(format="something-else"), "field format is 'something-else'"),
        (lambda d: d.update(jobs={}), "field jobs must be a list"),
        (lambda d: d["jobs"][1].pop("variant"), "jobs[1]: field variant must be a non-empty string"),
        (lambda d: d["jobs"].__setitem__(0, 7), "jobs[0]: expected an object"),
    ],
)
def test_a_bad_results_document_is_one_line_naming_the_field(mutate, message: str) -> None:
    document = results_document("b", {("t", "v"): ["passed", "failed"]})
    mutate(document)
    with pytest.raises(SideError, match=message.replace("[", r"\[").replace("]", r"\]")):
        side_from_document(document, source="x/results.json")


def test_a_side_is_a_batch_name_or_a_path(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    write_document(home.root / "nightly" / "report" / "results.json", results_document("nightly", BASE_PLAN))
    assert load_side("nightly", home).label == "nightly"
    artifact = write_document(
        tmp_path / "baseline" / "results.json", results_document("nightly-old", BASE_PLAN)
    )
    assert load_side(str(artifact), home).label == "nightly-old"
    assert load_side(str(artifact.parent), home).source == str(artifact)  # its folder works too
    (home.root / "fresh").mkdir()
    with pytest.raises(SideError, match="batch fresh has no report/results.json yet"):
        load_side("fresh", home)
    with pytest.raises(SideError, match="neither a batch"):
        load_side("nope", home)
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(SideError, match="broken.json: not JSON"):
        load_side(str(tmp_path / "broken.json"), home)


def test_the_table_and_markdown_show_every_row(tmp_path: Path) -> None:
    diff = _diff()
    console = Console(width=250, record=True)
    console.print(diff_table(diff))
    text = console.export_text()
    for needle in (
        "hello × careful",
        "careful (all tasks)",
        "overall",
        "regression",
        "improvement",
        "no change",
        "-80 pts",
        "+$0.0360",
        "+5.2",
        "Fisher exact p < 0.05",
    ):
        assert needle in text, needle
    md = diff_markdown(diff)
    lines = md.splitlines()
    assert lines[0].startswith("### flower-batch: nightly-2 vs baseline nightly-1 — ❌ regression")
    header = next(i for i, line in enumerate(lines) if line.startswith("| cell |"))
    assert set(lines[header + 1]) <= set("|-")
    table = [line for line in lines[header + 2 :] if line.startswith("|")]
    assert len(table) == len(diff.rows) == 3 + 2 + 1
    assert all(line.count(" | ") == len(lines[header].split(" | ")) - 1 for line in table)
    assert "- only in the baseline: fizz × quick" in md and "- only in the new batch: bye × careful" in md


def test_the_table_and_markdown_list_regressions_first() -> None:
    # The regression is the last cell here: a reader of a nightly still sees it first.
    diff = dataclasses.replace(_diff(), cells=tuple(reversed(_diff().cells)))
    assert diff.cells[-1].verdict == REGRESSION
    console = Console(width=250, record=True)
    console.print(diff_table(diff))
    text = console.export_text()
    assert text.index("hello × careful") < text.index("fizz × careful") < text.index("overall")
    md = diff_markdown(diff)
    assert md.index("| hello × careful |") < md.index("| fizz × careful |") < md.index("**overall**")
    assert md.count("| hello × careful |") == 1


# -- the command ---------------------------------------------------------------------------------------


@pytest.fixture
def sides(tmp_path: Path) -> tuple[Path, Path, Path]:
    home = tmp_path / "home"
    base = write_document(
        home / "nightly-1" / "report" / "results.json", results_document("nightly-1", BASE_PLAN)
    )
    new = write_document(tmp_path / "artifact" / "results.json", results_document("nightly-2", NEW_PLAN))
    return home, base, new


def _cli(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, list(args), env=env)


def test_compare_prints_the_table_and_exits_0_or_1_with_fail_on_regression(sides) -> None:
    home, _, new = sides
    shown = _cli("compare", "nightly-1", str(new), "--home", str(home))
    assert shown.exit_code == 0, shown.output
    assert "hello × careful" in shown.output and "regression" in shown.output
    assert "only in the baseline: fizz × quick" in shown.output
    gated = _cli("compare", "nightly-1", str(new), "--fail-on-regression", "--home", str(home))
    assert gated.exit_code == 1
    same = _cli("compare", str(new), str(new), "--fail-on-regression", "--home", str(home))
    assert same.exit_code == 0 and "0 regressions" in same.output


def test_compare_json_and_markdown(sides) -> None:
    home, base, new = sides
    as_json = _cli("compare", str(base), str(new), "--json", "--home", str(home))
    assert as_json.exit_code == 0
    document = json.loads(as_json.output)
    assert document["format"] == "flower-batch/comparison@1" and document["regressions"] == 1
    assert document["base"]["label"] == "nightly-1" and document["new"]["label"] == "nightly-2"
    verdicts = {(c["task"], c["variant"]): c["verdict"] for c in document["cells"]}
    assert verdicts == {
        ("hello", "careful"): "regression",
        ("hello", "quick"): "no change",
        ("fizz", "careful"): "improvement",
    }
    assert document["only_in_base"] == [{"task": "fizz", "variant": "quick"}]
    assert document["cells"][0]["mean_turns_delta"] == pytest.approx(5.2)
    assert document["cells"][0]["new"]["ci95"] == pytest.approx(list(wilson_interval(2, 10)))
    md = _cli("compare", str(base), str(new), "--markdown", "--home", str(home))
    assert md.exit_code == 0 and md.output.startswith("### flower-batch: nightly-2 vs baseline nightly-1")
    assert "| **overall** |" in md.output


def test_compare_appends_to_the_github_step_summary(sides, tmp_path: Path) -> None:
    home, base, new = sides
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    done = _cli(
        "compare",
        str(base),
        str(new),
        "--summary",
        "--home",
        str(home),
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert done.exit_code == 0
    text = summary.read_text()
    assert text.startswith("earlier step\n### flower-batch: nightly-2 vs baseline nightly-1")
    refused = _cli(
        "compare", str(base), str(new), "--summary", "--home", str(home), env={"GITHUB_STEP_SUMMARY": ""}
    )
    assert refused.exit_code == 2 and "GITHUB_STEP_SUMMARY is not set" in refused.output


@pytest.mark.parametrize(
    "args",
    [
        ("compare", "missing-batch", "{new}"),
        ("compare", "{new}", "{tmp}/nothing/results.json"),
        ("compare", "{new}", "{new}", "--alpha", "1.5"),
        ("compare", "{new}", "{new}", "--json", "--markdown"),
    ],
)
def test_compare_bad_usage_is_one_line_and_exit_2(sides, tmp_path: Path, args) -> None:
    home, _, new = sides
    argv = [a.format(new=new, tmp=tmp_path) for a in args]
    result = _cli(*argv, "--home", str(home))
    assert result.exit_code == 2, result.output
    assert result.output.startswith("flower-batch: ") and len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)  # no crash behind the line


def test_a_side_without_a_batch_name_is_named_by_its_file_literally() -> None:
    document = results_document("", {("t", "v"): ["passed"]})
    side = side_from_document(document, source="ci/[red]artifact[/red]/results.json")
    assert side.label == "ci/[red]artifact[/red]/results.json"
    console = Console(width=250, record=True)
    console.print(diff_table(diff_sides(side, side)))
    assert "vs baseline ci/[red]artifact[/red]/results.json" in console.export_text()  # not taken for markup
