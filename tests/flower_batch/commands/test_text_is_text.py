"""Text is text (issue 11.6): user, file and model text is printed as it is, never read as rich
markup — a scenario error quoting `[[rules]]`, a reason with `[bold]`, a variant named `[red]x`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from flower_batch.cli import app
from flower_batch.commands.common import fail
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.record import new_record, write_record
from flower_batch.jobmodel.spec import GatewaySpec, JobSpec
from flower_batch.jobmodel.status import Status
from flower_batch.layout import Home
from flower_batch.reports import comparison_table, results_from_records

SCENARIO_ERROR = "jobs/s.toml: [[rules]] #2 'boom': field 'error': unsupported HTTP status 418"
REASON = "step [bold]fix[/bold] failed: tool said [red]no[/red] and [[rules]] matched"


def test_a_scenario_error_keeps_its_brackets(capsys) -> None:
    with pytest.raises(typer.Exit):
        fail(SCENARIO_ERROR)
    assert capsys.readouterr().err.strip() == f"flower-batch: {SCENARIO_ERROR}"


def _job_with_reason(home: Path, reason: str, persistent: bool = True) -> None:
    job = JobSpec(
        id="j1", task="t", variant="v", repeat=1, matrix={}, prompt="hi", gateway=GatewaySpec(mode="scripted")
    )
    record = new_record(job, batch="b", image_id="sha256:img").with_outcome(
        JobOutcome(
            job_id="j1",
            status=Status.FAILED,
            reason=reason,
            check_output="[dim]out[/dim]",
            failure_class="agent",
        ),
        finished_at="2026-01-01T00:00:00+00:00",
    )
    from dataclasses import replace

    record = replace(
        record,
        continuity=(
            {
                "step": "[b]fix[/b]",
                "continued": False,
                "session": None,
                "reason": "lineage.json unreadable: [x]",
            },
        ),
        spec=replace(record.spec, persistent=persistent),
    )
    write_record(home.job("b", "j1").record_path, record)


def test_show_prints_a_reason_check_output_and_continuity_as_they_are(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _job_with_reason(Home(home), REASON)
    (home / "b" / "j1" / "runs").mkdir(parents=True)
    (home / "b" / "j1" / "runs" / "manifest.json").write_text(
        json.dumps([{"run": "r", "step": "[bold]fix", "ok": False, "error": "[red]boom[/red]"}])
    )
    result = CliRunner().invoke(app, ["show", "b/j1", "--home", str(home)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    for text in (
        REASON,
        "[dim]out[/dim]",
        "step [b]fix[/b]: started fresh: lineage.json unreadable: [x]",
        "[bold]fix",
        "[red]boom[/red]",
    ):
        assert text in result.output, text
    assert "agent" in result.output  # the failure class is shown too
    listed = CliRunner().invoke(app, ["ls", "--json", "--home", str(home)])
    assert [(r["job"], r["class"], r["reason"]) for r in json.loads(listed.output)] == [
        ("j1", "agent", REASON)
    ]


def test_a_bracketed_job_or_task_name_is_quoted_as_typed(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    env = {"COLUMNS": "300"}
    ran = CliRunner().invoke(
        app,
        ["run", str(tmp_path / "ws"), "do it", "--name", "[bold]j", "--home", str(tmp_path / "home")],
        env=env,
    )
    assert ran.exit_code == 2 and "job name '[bold]j' is not usable" in ran.output, ran.output
    (tmp_path / "jobs.toml").write_text('[tasks."[red]x"]\nworkspace = "ws"\nprompt = "hi"\n')
    matrix = CliRunner().invoke(
        app, ["matrix", str(tmp_path / "jobs.toml"), "--home", str(tmp_path / "home")], env=env
    )
    assert matrix.exit_code == 2 and 'tasks."[red]x": task names may use' in matrix.output, matrix.output
    assert not (tmp_path / "home").exists()


def test_the_matrix_table_title_is_text() -> None:
    results = results_from_records({}, batch="[bold]b", jobs=[])
    console = Console(record=True, width=200)
    console.print(comparison_table(results))
    assert "[bold]b" in console.export_text()
