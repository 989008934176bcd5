"""`flower-batch run PROJECT` where the project holds a symlink out of it, a FIFO and a 200 MB
file (issue 34): refused before anything exists, in one line with its size and largest folders;
with the big folder left out (--exclude) the job runs, the symlink and the FIFO named and never
copied."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.batch_fixtures.rig import PROJECT, fb, private_home, runtime_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield from private_home(tmp_path)


def test_run_on_a_hostile_project_is_bounded_and_named(home: Path, tmp_path: Path) -> None:
    image = runtime_image()
    proj = tmp_path / "proj"
    shutil.copytree(PROJECT / "tasks" / "alpha", proj)
    (proj / "outside").symlink_to("/etc")
    os.mkfifo(proj / "pipe")
    (proj / "big").mkdir()
    with (proj / "big" / "dump.bin").open("wb") as f:
        f.truncate(200 << 20 | 1)  # sparse: 200 MB and a byte, on no disk
    job = ["run", proj, "-f", f"{PROJECT}/flows.py:solo", "--prompt", "Read TASK.md and do what it asks."]
    job += [
        "--scenario",
        PROJECT / "scenarios" / "quick.toml",
        "--image",
        image,
        "--check",
        "grep -qx alpha answer.txt",
    ]

    refused = fb(*job, "--name", "big", home=home)
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    skipped = f"warning: workspace {proj}: not copied: outside (symlink -> /etc: points out of the workspace); pipe (fifo)"
    assert lines[0] == skipped
    assert len(lines) == 2 and lines[1].startswith(
        f"flower-batch: workspace {proj} is 200.0 MiB, over the 200.0 MiB"
    )
    assert "(largest: big/ 200.0 MiB, TASK.md " in lines[1] and lines[1].endswith(
        "--workspace-limit SIZE (or none)"
    )
    assert not (home / "adhoc" / "big").exists()  # nothing written

    ran = fb(*job, "--name", "small", "--exclude", "big/", home=home)
    assert ran.returncode == 0, ran.stderr
    assert skipped in ran.stderr and "small: passed" in ran.stderr
    workspace = home / "adhoc" / "small" / "workspace"
    assert sorted(os.listdir(workspace)) == ["TASK.md", "answer.txt"]
