"""SIGTERM to a running `matrix` (issue 34): CI systems cancel with SIGTERM, and it stops the
batch as Ctrl-C does: every running job's container stopped, every record final (the running
ones `error: interrupted`, the queued one `skipped: never started`), no container left, exit 143,
within the grace period."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.batch_fixtures.rig import (
    Job,
    fb_start,
    labelled,
    private_home,
    project_copy,
    runtime_image,
    wait_for,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

JOBS_TOML = """
[batch]
name = "mx-sigterm"

[defaults]
workflow = "flows:solo"
prompt = "Read TASK.md and do what it asks."
timeout = "5m"
gateway = { mode = "scripted", scenario = "scenarios/slow.toml" }

[tasks.slow]
workspace = "tasks/slow"

[matrix]
repeat = 3
"""
JOBS = ("slow.r1", "slow.r2", "slow.r3")
GRACE_S = 60  # runner.GRACE_S to stop each container, with room for the records and the gateway


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield from private_home(tmp_path)


def test_sigterm_mid_matrix_leaves_every_record_final_and_no_container(home: Path, tmp_path: Path) -> None:
    project = project_copy(tmp_path / "project")
    (project / "jobs.toml").write_text(JOBS_TOML)
    image = runtime_image()
    log = tmp_path / "matrix.out"
    proc = fb_start(
        "matrix", project / "jobs.toml", "-j", "2", "--image", image, home=home, cwd=project, log=log
    )
    jobs = [Job(home, "mx-sigterm", j) for j in JOBS]
    ids = {j.job: j for j in jobs}
    assert set(ids) == set(JOBS)

    def two_stalled() -> bool:
        stalled = [j for j in jobs if any(r["rule"] == "stall" for r in j.gateway_log())]
        return len(stalled) == 2 or proc.poll() is not None

    wait_for("two jobs stalled at the model", two_stalled, timeout=180, every=0.1)
    assert proc.poll() is None, log.read_text()
    os.kill(proc.pid, signal.SIGTERM)  # as `timeout` or a CI runner sends it: to the process only
    sent = time.monotonic()
    code = proc.wait(timeout=GRACE_S)
    took = time.monotonic() - sent
    text = log.read_text()
    assert code == 143, text
    assert took < GRACE_S and "Traceback" not in text
    assert "stopped by SIGTERM" in text
    records = {j.job: j.record() for j in jobs}
    assert all(r["finished_at"] for r in records.values()), records
    statuses = sorted((r["status"], (r["reason"] or "").split(":")[0]) for r in records.values())
    assert statuses == [("error", "interrupted"), ("error", "interrupted"), ("skipped", "never started")], (
        statuses
    )
    assert not labelled("mx-sigterm"), labelled("mx-sigterm").describe()
