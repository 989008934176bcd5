"""Exit codes of the job commands (issue 21 item 5): `run`, `wake` and `repro` exit 3 on an
infrastructure failure, as `matrix` does — from a job that ended in one (one rule for all,
jobmodel/classes.py) and from an engine that does not answer before any job ran."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from flower_batch.jobmodel.classes import EXIT_INFRASTRUCTURE, exit_code_for, exit_code_for_job
from flower_batch.jobmodel.record import write_record
from tests.view_fixtures import record

REPO = Path(__file__).resolve().parents[3]
MAIN = "from flower_batch.cli import main; main()"
NO_ENGINE = "unix:///nonexistent/flower-batch-test/docker.sock"


@pytest.mark.parametrize(
    ("klass", "verdict_ok", "code"),
    [
        ("passed", True, 0),
        ("agent", False, 1),
        ("verifier", False, 1),
        ("timeout", False, 1),
        ("budget", False, 1),
        ("infrastructure", False, 3),
        ("infrastructure", True, 3),  # repro: identical manifests, but no verdict to trust
        (None, False, 1),  # a record of before failure classes: its status decides
    ],
)
def test_one_job_exits_by_matrix_rule(klass: str | None, verdict_ok: bool, code: int) -> None:
    assert exit_code_for_job(klass, verdict_ok=verdict_ok) == code
    counts = {"infrastructure": 1} if klass == "infrastructure" else {}
    assert exit_code_for(counts, threshold_met=verdict_ok) == code  # the same rule matrix follows


def _fb(home: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DOCKER_HOST": NO_ENGINE, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    env.pop("FLOWER_BATCH_BACKEND", None)
    return subprocess.run(
        [sys.executable, "-c", MAIN, *map(str, args), "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def _one_line_exit_3(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == EXIT_INFRASTRUCTURE, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flower-batch:"), proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.fixture
def home_with_a_persistent_job(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    root = home / "adhoc" / "keep"
    root.mkdir(parents=True)
    rec = record("adhoc", "keep", "error", failure_class="infrastructure")
    rec = replace(rec, spec=replace(rec.spec, persistent=True))
    write_record(root / "record.json", rec)
    (root / "scenario.toml").write_text((REPO / "examples" / "scenarios" / "starter.toml").read_text())
    return home


def test_run_exits_3_when_the_engine_does_not_answer(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    scenario = REPO / "examples" / "scenarios" / "starter.toml"
    _one_line_exit_3(_fb(tmp_path / "home", "run", ws, "say hi", "--scenario", scenario, "--name", "j1"))
    assert not (tmp_path / "home" / "adhoc" / "j1" / "record.json").exists()


def test_wake_and_repro_exit_3_when_the_engine_does_not_answer(home_with_a_persistent_job: Path) -> None:
    _one_line_exit_3(_fb(home_with_a_persistent_job, "wake", "keep"))
    _one_line_exit_3(_fb(home_with_a_persistent_job, "repro", "keep"))


def test_matrix_exits_3_when_the_engine_does_not_answer(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.toml"
    (tmp_path / "ws").mkdir()
    jobs.write_text(
        '[batch]\nname = "b"\n\n[tasks.t]\nworkspace = "ws"\nprompt = "hi"\n'
        'gateway = { mode = "scripted", scenario = "'
        + str(REPO / "examples" / "scenarios" / "starter.toml")
        + '" }\n'
    )
    _one_line_exit_3(_fb(tmp_path / "home", "matrix", jobs))
