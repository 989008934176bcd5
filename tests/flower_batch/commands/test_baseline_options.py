"""`matrix --baseline` and `report --baseline`: the comparison after a run (table, comparison.json /
.md, report.html section, $GITHUB_STEP_SUMMARY) and the exit code with --fail-on-regression.

The matrix runs the real command on a fake backend: every job already has a finished record
with the current inputs, so nothing is started and only the reporting half runs for real."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flower_batch.cli import app
from flower_batch.commands import environments as environments_cmd
from flower_batch.commands import matrix as matrix_cmd
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.record import new_record, write_record
from flower_batch.jobmodel.status import Status
from flower_batch.jobsfile import load_jobs_file
from flower_batch.layout import Home
from tests.compare_fixtures import results_document, write_document
from tests.fake_backend import FakeBackend

REPO = Path(__file__).resolve().parents[3]
IMAGE_ID = "sha256:" + "c" * 64
JOBS = """
[batch]
name = "nightly"
[defaults]
prompt = "do it"
gateway = { mode = "scripted", scenario = "demo.toml" }
[tasks.t]
workspace = "ws"
[matrix]
variant = ["a", "b"]
repeat = 6
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "ws").mkdir()
    shutil.copyfile(REPO / "examples" / "scenarios" / "demo.toml", tmp_path / "demo.toml")
    (tmp_path / "jobs.toml").write_text(JOBS)
    home = Home(tmp_path / "home")
    # Today: variant a passes 6/6, variant b fails 6/6; recorded with today's inputs, so all are kept.
    for job in load_jobs_file(tmp_path / "jobs.toml").jobs:
        status = Status.PASSED if job.variant == "a" else Status.FAILED
        record = new_record(job, batch="nightly", image_id=IMAGE_ID).with_outcome(
            JobOutcome(
                job.id,
                status,
                workflow_ok=status is Status.PASSED,
                check_exit=0,
                cost_usd=0.02,
                num_turns=4,
                duration_s=12.0,
                gateway_mode="scripted",
            ),
            finished_at="2026-12-01T03:30:00+00:00",
        )
        write_record(home.job("nightly", job.id).record_path, record)
    monkeypatch.setattr(environments_cmd, "pinned_image", lambda ref: PinnedImage(IMAGE_ID, {}))
    monkeypatch.setattr(matrix_cmd, "backend_for", lambda home, flag=None, recorded=None: FakeBackend())
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return tmp_path


def _baseline(project: Path, b_passes: bool) -> Path:
    plan = {("t", "a"): ["passed"] * 6, ("t", "b"): ["passed" if b_passes else "failed"] * 6}
    return write_document(project / "artifact" / "results.json", results_document("nightly", plan))


def _run(project: Path, *args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, [*args, "--home", str(project / "home")], env=env)


def _matrix(project: Path, *args: str, env: dict[str, str] | None = None):
    return _run(project, "matrix", str(project / "jobs.toml"), "--fail-under", "0.5", *args, env=env)


def test_matrix_baseline_reports_the_regression_and_fail_on_regression_exits_1(project: Path) -> None:
    base = _baseline(project, b_passes=True)
    summary = project / "summary.md"
    shown = _matrix(project, "--baseline", str(base), env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert shown.exit_code == 0, shown.output  # 6/12 >= 0.5, and no --fail-on-regression
    assert "12 kept, 0 to run" in shown.output
    assert "t × b" in shown.output and "regression" in shown.output
    report = project / "home" / "nightly" / "report"
    comparison = json.loads((report / "comparison.json").read_text())
    assert [(c["variant"], c["verdict"]) for c in comparison["cells"]] == [
        ("a", "no change"),
        ("b", "regression"),
    ]
    assert comparison["cells"][1]["p_value"] == pytest.approx(2 / 924)  # 6/6 -> 0/6
    html = (report / "report.html").read_text()
    assert 'id="baseline"' in html and 'data-verdict="regression" data-task="t" data-variant="b"' in html
    assert summary.read_text().startswith("### flower-batch: nightly vs baseline nightly — ❌ regression")
    assert summary.read_text() == (report / "comparison.md").read_text()
    gated = _matrix(project, "--baseline", str(base), "--fail-on-regression")
    assert gated.exit_code == 1, gated.output


def test_matrix_without_a_regression_passes_the_gate(project: Path) -> None:
    base = _baseline(project, b_passes=False)
    result = _matrix(project, "--baseline", str(base), "--fail-on-regression")
    assert result.exit_code == 0, result.output
    assert "0 regressions" in result.output


def test_matrix_baseline_problems_stop_before_anything_is_written(project: Path) -> None:
    missing = _matrix(project, "--baseline", str(project / "nowhere" / "results.json"))
    assert missing.exit_code == 2 and "--baseline:" in missing.output and "neither a batch" in missing.output
    lonely = _matrix(project, "--fail-on-regression")
    assert lonely.exit_code == 2 and "--fail-on-regression needs --baseline" in lonely.output
    assert "Traceback" not in missing.output + lonely.output
    assert not (project / "home" / "nightly" / "batch.json").exists()
    assert not (project / "home" / "nightly" / "report").exists()


def test_report_baseline_adds_the_section_and_gates(project: Path) -> None:
    base = _baseline(project, b_passes=True)
    assert _matrix(project).exit_code == 0  # writes batch.json and a plain report first
    report = project / "home" / "nightly" / "report"
    assert 'id="baseline"' not in (report / "report.html").read_text()
    again = _run(project, "report", "nightly", "--baseline", str(base))
    assert again.exit_code == 0, again.output
    assert 'id="baseline"' in (report / "report.html").read_text()
    assert _run(project, "report", "nightly", "--baseline", str(base), "--fail-on-regression").exit_code == 1
    # a batch is its own baseline: read before its report is rewritten, so no change
    assert _run(project, "report", "nightly", "--baseline", "nightly", "--fail-on-regression").exit_code == 0
