"""`matrix --dry-run` says when the jobs' own disks, all at their limits at once, would not fit on
the home above its reserve (a job's disk is sparse: the home is shared, not divided), and says
nothing when they fit. Nothing is written either way."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.batch_fixtures.rig import fb, project_copy, runtime_image

pytestmark = pytest.mark.docker

JOBS = """
[batch]
name = "disks"
[defaults]
workflow = "flows:solo"
prompt = "hi"
disk = "{disk}"
gateway = {{ mode = "scripted", scenario = "scenarios/quick.toml" }}
[tasks.alpha]
workspace = "tasks/alpha"
[tasks.beta]
workspace = "tasks/beta"
"""


@pytest.mark.parametrize(("disk", "said"), [("900t", True), ("64m", False)])
def test_the_plan_says_when_the_disks_could_outgrow_the_home(tmp_path: Path, disk: str, said: bool) -> None:
    project = project_copy(tmp_path / "p")
    (project / "jobs.toml").write_text(JOBS.format(disk=disk))
    home = tmp_path / "home"
    dry = fb(
        "matrix", "jobs.toml", "--dry-run", "-j", "2", "--image", runtime_image(), home=home, cwd=project
    )
    assert dry.returncode == 0, dry.stderr
    notes = [line for line in dry.stderr.splitlines() if line.startswith("note: the jobs running at once")]
    assert len(notes) == int(said), dry.stderr
    if said:
        assert "on their own disks" in notes[0] and "--disk" in notes[0] and "(-j)" in notes[0]
    assert not (home / "disks").exists()
