"""`matrix` and `report` on bad input, without Docker: gateway needs checked first, -j below one, a
damaged batch.json, and batch.json written atomically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def _spec(job_id: str, mode: str = "anthropic"):
    from flower_batch.jobmodel.spec import GatewaySpec, JobSpec

    return JobSpec(
        id=job_id, task="t", variant="v", repeat=1, matrix={}, prompt="hi", gateway=GatewaySpec(mode=mode)
    )


def _jobs_file(tmp_path: Path, gateway: str) -> Path:
    (tmp_path / "ws").mkdir(exist_ok=True)
    path = tmp_path / "jobs.toml"
    path.write_text(
        f'[batch]\nname = "b"\n[defaults]\ngateway = {gateway}\n[tasks.t]\nworkspace = "ws"\nprompt = "hi"\n'
    )
    return path


def _matrix(tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    from typer.testing import CliRunner

    from flower_batch.cli import app

    return CliRunner().invoke(app, [*args, "--home", str(tmp_path / "home")], env=env)


def test_matrix_checks_gateway_mode_needs_before_anything_runs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    jobs = _jobs_file(tmp_path, '{ mode = "anthropic" }')
    result = _matrix(tmp_path, "matrix", str(jobs), "--image", "sha256:" + "0" * 64)
    assert result.exit_code == 2
    assert "gateway mode anthropic needs your API key in ANTHROPIC_API_KEY" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "home" / "b").exists()


@pytest.mark.parametrize("parallel", ["0", "-3"])
def test_matrix_refuses_parallel_below_one(tmp_path: Path, parallel: str) -> None:
    jobs = _jobs_file(tmp_path, '{ mode = "anthropic" }')
    result = _matrix(
        tmp_path, "matrix", str(jobs), "-j", parallel, "--dry-run", env={"ANTHROPIC_API_KEY": "sk-test"}
    )
    assert result.exit_code == 2
    assert "--parallel" in result.output and len(result.output.strip().splitlines()) == 1


def test_report_on_a_damaged_batch_json_warns_once_and_reports_from_records(tmp_path: Path) -> None:
    from flower_batch.jobmodel.outcome import JobOutcome
    from flower_batch.jobmodel.record import new_record, write_record
    from flower_batch.jobmodel.status import Status
    from flower_batch.layout import Home

    home = Home(tmp_path / "home")
    job = _spec("t.v.r1")
    record = new_record(job, batch="b", image_id="sha256:img", attempt=1).with_outcome(
        JobOutcome(job_id=job.id, status=Status.PASSED, gateway_mode="anthropic"),
        finished_at="2026-01-01T00:00:00+00:00",
    )
    write_record(home.job("b", job.id).record_path, record)
    (home.batch_dir("b") / "batch.json").write_text('{"jobs_file": "/x/jobs.toml", "image_')  # cut short
    result = _matrix(tmp_path, "report", "b")
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 0
    assert sum("batch.json is unreadable" in line for line in result.output.splitlines()) == 1
    assert (home.batch_dir("b") / "report" / "results.json").exists()


def test_batch_file_is_written_atomically(tmp_path: Path, monkeypatch) -> None:
    from flower_batch.commands import matrix as matrix_cmd

    calls: list[Path] = []
    real = matrix_cmd.write_atomic

    def spy(path, data, **kw):  # type: ignore[no-untyped-def]
        calls.append(Path(path))
        real(path, data, **kw)

    monkeypatch.setattr(matrix_cmd, "write_atomic", spy)
    matrix_cmd.write_batch_file(tmp_path / "b", tmp_path / "jobs.toml", "sha256:img", {}, "scripted")
    assert calls == [tmp_path / "b" / "batch.json"]
    assert json.loads((tmp_path / "b" / "batch.json").read_text())["image_id"] == "sha256:img"
