"""A persistent job whose orchestrator was SIGKILLed mid-step: `ls`/`show` say `orphaned`, and
`wake` repairs it (issue 11 item 5, issue 10 item 4), on the real engine and the real CLI."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.batch_fixtures.rig import (
    PROJECT,
    Job,
    fb,
    fb_start,
    leftovers,
    private_home,
    runtime_image,
    sigkill_group,
    wait_for,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield from private_home(tmp_path)


def _status(home: Path, job: str) -> dict:
    rows = json.loads(fb("ls", "--json", home=home).stdout)
    return next(r for r in rows if r["job"] == job)


def test_wake_repairs_a_job_orphaned_by_a_killed_orchestrator(home: Path, tmp_path: Path) -> None:
    name = f"orphaned-{secrets.token_hex(3)}"  # `wake` looks for live containers by job label
    proc = fb_start(
        "run",
        PROJECT / "tasks" / "slow",
        "-f",
        f"{PROJECT}/flows.py:solo",
        "--prompt",
        "Read TASK.md and do what it asks.",
        "--scenario",
        PROJECT / "scenarios" / "slow.toml",
        "--name",
        name,
        "--persistent",
        "--image",
        runtime_image(),
        home=home,
        log=tmp_path / "orphan.out",
    )
    job = Job(home, "adhoc", name)
    wait_for(
        "the step to stall at the model",
        lambda: any(r["rule"] == "stall" for r in job.gateway_log()) or proc.poll() is not None,
        timeout=180,
    )
    assert proc.poll() is None, (tmp_path / "orphan.out").read_text()
    assert _status(home, name)["status"] == "running"  # its orchestrator is alive
    sigkill_group(proc)
    assert job.record()["status"] == "running"  # the record itself cannot know
    row = _status(home, name)
    assert row["status"] == "orphaned" and row["recorded_status"] == "running"
    assert job.record()["session"] in row["reason"]
    shown = fb("show", name, home=home)
    assert "orphaned" in shown.stdout and "wake" in shown.stdout
    # the killed orchestrator's containers are leaked: gc removes them, then wake continues it
    assert fb("gc", home=home).returncode == 0
    woken = fb("wake", name, home=home, timeout=180)
    assert woken.returncode == 0, woken.stderr
    assert "left running by an orchestrator that is gone" in woken.stderr
    row = _status(home, name)
    assert row["status"] == "passed" and row["attempt"] == 2
    assert not leftovers(home, "adhoc"), leftovers(home, "adhoc").describe()
