"""Bad disk input gets one line each and nothing is written (issue 36): `disk = "lots"` in
jobs.toml, `--disk lots` on run, a `--reserve` larger than the home's disk, and a `disk` below
what the job needs to start (its workspace copy and the filesystem's room)."""

from __future__ import annotations

from pathlib import Path

from flower_batch.jobmodel.spec import JobSpec
from flower_batch.preflight.workspaces import workspace_findings
from tests.batch_fixtures.rig import fb, one_line_error

JOBS = """
[tasks.t]
prompt = "p"
gateway = {{ mode = "scripted", scenario = "s.toml" }}
{extra}
"""


def test_a_disk_that_is_no_size_and_a_reserve_no_disk_holds_are_one_line_each(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (tmp_path / "s.toml").write_text('[[rules]]\nreply = "ok"\n')
    (tmp_path / "jobs.toml").write_text(JOBS.format(extra='disk = "lots"'))
    lots = fb("matrix", tmp_path / "jobs.toml", home=home, cwd=tmp_path)
    assert "Traceback" not in lots.stderr and lots.returncode == 2, lots.stderr
    assert (
        'jobs.toml:5: tasks.t.disk: expected a disk size like "500m" or "10g" (or bytes), got "lots"'
        in lots.stderr
    )
    (tmp_path / "jobs.toml").write_text(JOBS.format(extra=""))
    line = one_line_error(
        fb("matrix", tmp_path / "jobs.toml", "--reserve", "100000t", home=home, cwd=tmp_path)
    )
    assert "--reserve 100000t: larger than the home's whole disk" in line
    line = one_line_error(fb("run", tmp_path, "a task", "--disk", "lots", home=home, cwd=tmp_path))
    assert "--disk 'lots': expected a disk size" in line
    assert not home.exists()  # nothing written


def test_a_disk_below_what_the_job_needs_to_start_is_refused_before_anything_runs(tmp_path: Path) -> None:
    source = tmp_path / "task"
    source.mkdir()
    (source / "data.bin").write_bytes(b"\0" * (50 * 1024**2))
    job = JobSpec(
        id="t.r1", task="t", variant="v", repeat=1, matrix={}, prompt="p", workspace=source, disk=64 * 1024**2
    )
    found = workspace_findings([job], None, fix="workspace_limit")
    assert found.problems == [
        'job t.r1: disk = "64m" is below what it needs to start: its workspace copy is 50.0 MiB, and its '
        'filesystem and runs folder need 24.0 MiB more; give it at least disk = "79m"'
    ]
    assert (
        workspace_findings([job.__class__(**{**job.__dict__, "disk": 80 * 1024**2})], None, fix="").problems
        == []
    )
