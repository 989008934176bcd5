"""`ls` never cuts a job id (issue 21 item 4): at 60 columns the other columns wrap or go, at 200
all are shown, an id wider than the terminal is printed whole; `ls --json` is the same at any width."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.view_fixtures import write_job

REPO = Path(__file__).resolve().parents[3]
MAIN = "from flower_batch.cli import main; main()"
NIGHTLY = "nightly-2026-12-01"
IDS = ["fizzbuzz.c-sonnet-strict.r1", "fizzbuzz.python-opus-lenient.r12", "x[red]y"]
HEADERS = ["batch", "job", "status", "cost", "turns", "time", "model", "wakes"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    write_job(home, NIGHTLY, IDS[0], "passed", cost_usd=0.0123, num_turns=7, duration_s=65.0)
    write_job(home, NIGHTLY, IDS[1], "failed", cost_usd=1.5, num_turns=31, duration_s=3605.0)
    write_job(home, "other", IDS[2], "passed")  # markup-looking: shown as text
    return home


def ls(home: Path, columns: int, *args: str) -> str:
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    env.pop("FORCE_COLOR", None)
    proc = subprocess.run(
        [sys.executable, "-c", MAIN, "ls", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    return proc.stdout


def _whole(out: str, job_id: str) -> bool:
    return any(job_id in line for line in out.splitlines())


def test_at_60_columns_every_id_is_whole_and_the_table_fits(home: Path) -> None:
    out = ls(home, 60)
    assert all(_whole(out, i) for i in IDS), out
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 60, out
    assert "status" in out and "wakes" not in out  # a column went, not a character of an id


def test_at_200_columns_every_column_is_shown(home: Path) -> None:
    out = ls(home, 200)
    header = next(line for line in out.splitlines() if "job" in line and "status" in line)
    assert all(h in header for h in HEADERS), header
    assert all(_whole(out, i) for i in IDS) and "…" not in out
    assert "$1.5000 (CLI)" in out and NIGHTLY in out


def test_one_batch_at_60_columns_moves_the_batch_into_the_title(home: Path) -> None:
    out = ls(home, 60, "--batch", NIGHTLY)
    assert f"jobs (2) · batch {NIGHTLY}" in out
    assert all(_whole(out, i) for i in IDS[:2]) and "…" not in out


def test_an_id_wider_than_the_terminal_is_printed_whole(home: Path) -> None:
    out = ls(home, 20)
    assert all(_whole(out, i) for i in IDS), out


def test_ls_json_is_the_same_at_any_width(home: Path) -> None:
    narrow, wide = json.loads(ls(home, 60, "--json")), json.loads(ls(home, 200, "--json"))
    assert narrow == wide
    assert sorted(r["job"] for r in narrow) == sorted(IDS)
    assert set(narrow[0]) == {
        "batch", "job", "status", "recorded_status", "class", "reason", "gateway_restarts", "cost_usd",
        "metered", "num_turns", "duration_s", "started_at", "gateway_mode", "attempt", "persistent", "image_id", "task_image", "reward",
    }  # fmt: skip


def test_a_graded_job_shows_its_reward_and_a_batch_without_one_has_no_such_column(home: Path) -> None:
    from flower_batch.jobmodel.grading import Reward

    assert "reward" not in ls(home, 200)
    write_job(home, "bench", "hello-world.default.r1", "failed", reward=Reward(0.25, {}))
    out = ls(home, 200)
    header = next(line for line in out.splitlines() if "job" in line and "status" in line)
    assert header.index("status") < header.index("reward") < header.index("cost"), header
    row = next(line for line in out.splitlines() if "hello-world.default.r1" in line)
    assert "0.25" in row
    assert [r["reward"] for r in json.loads(ls(home, 200, "--json")) if r["batch"] == "bench"] == [0.25]
