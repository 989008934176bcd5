"""A job's own disk and a full home on Docker (issue 36), as root like CI, on a home that is a
loop filesystem of its own, in one test (one home, two batches):

1. a 3-job matrix in which one job writes until it cannot. The writer ends `disk` at its limit,
   naming it and the folder that grew; both neighbours pass; the report is written; nothing is
   retried; the same command again keeps all three; nothing of the disks (holder, volume, loop
   device, image file) is left;
2. the home itself nearly full (a ballast file): every job of a new batch is `skipped` by the
   reserve, with the reason; the home full to the last block: the command ends with one line
   naming the disk, no traceback, every record complete and none `running`; space freed: the
   same command runs them and keeps what finished;
3. a persistent job running when the home falls under the reserve is paused, its session kept;
   once space is freed the same command continues it in the same session, and it passes.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.batch_fixtures.rig import (
    Job,
    fb,
    fb_start,
    fill_disk,
    leftovers,
    project_copy,
    runtime_image,
    wait_for,
)
from tests.batch_fixtures.rig import loop_home as rig_loop_home

pytestmark = [pytest.mark.docker, pytest.mark.slow]

WRITER_TASK = "# WRITER-TASK\n\nFill the disk.\n"
SCENARIO = """
description = "issue 36: one job writes until it cannot"

[defaults]
usage = { input_tokens = 1000, output_tokens = 100 }

[[rules]]
name = "pause: continued, the answer written"
last_is_tool_result = true
tool_result_contains = "PAUSE-TASK, WOKEN"
reply = [{ tool_use = { name = "Write", input = { file_path = "{cwd}/answer.txt", content = "alpha\\n" } } }]

[[rules]]
name = "pause: the model thinks for a while"
last_is_tool_result = true
tool_result_contains = "PAUSE-TASK"
delay_s = 60
reply = "Too late."

[[rules]]
name = "read the task"
last_is_tool_result = false
last_user_contains = "TASK.md"
reply = [{ text = "Reading the task." }, { tool_use = { name = "Read", input = { file_path = "{cwd}/TASK.md" } } }]

[[rules]]
name = "writer: fill"
last_is_tool_result = true
tool_result_contains = "WRITER-TASK"
reply = [{ tool_use = { name = "Bash", input = { command = "dd if=/dev/zero of=big.bin bs=1M 2>&1 | tail -2; echo dd-ended", description = "fill" } } }]

[[rules]]
name = "writer: done"
last_is_tool_result = true
tool_result_contains = "dd-ended"
reply = "The disk is full."

[[rules]]
name = "alpha: write"
last_is_tool_result = true
tool_result_contains = "ALPHA-TASK"
reply = [{ tool_use = { name = "Write", input = { file_path = "{cwd}/answer.txt", content = "alpha\\n" } } }]

[[rules]]
name = "written"
last_is_tool_result = true
tool_result_contains = "answer.txt"
reply = "Wrote answer.txt."
"""
JOBS_TOML = """
[batch]
name = "{name}"

[defaults]
workflow = "flows:solo"
prompt = "Read TASK.md and do what it asks."
timeout = "2m"
check_timeout = "30s"
memory = "1g"
gateway = {{ mode = "scripted", scenario = "scenarios/disk.toml" }}

[tasks.writer]
workspace = "tasks/writer"
disk = "96m"

[tasks.alpha]
workspace = "tasks/alpha"
check = "grep -qx alpha answer.txt"

[tasks.alpha2]
workspace = "tasks/alpha"
check = "grep -qx alpha answer.txt"
"""
HOME_FS = 600 * 1024**2
PAUSE_TOML = """
[batch]
name = "{name}"

[defaults]
workflow = "flows:solo"
prompt = "Read TASK.md and do what it asks."
timeout = "3m"
memory = "1g"
disk = "128m"
persistent = true
gateway = {{ mode = "scripted", scenario = "scenarios/disk.toml" }}

[tasks.pauser]
workspace = "tasks/pause"
check = "grep -qx alpha answer.txt"
"""
FULL_TOML = """
[batch]
name = "{name}"

[defaults]
workflow = "flows:solo"
prompt = "Read TASK.md and do what it asks."
timeout = "2m"
check_timeout = "30s"
memory = "1g"
disk = "128m"
gateway = {{ mode = "scripted", scenario = "scenarios/disk.toml" }}
check = "grep -qx alpha answer.txt"

[tasks.one]
workspace = "tasks/alpha"

[tasks.two]
workspace = "tasks/alpha"
"""


@pytest.fixture
def loop_home(tmp_path: Path) -> Iterator[Path]:
    yield from rig_loop_home(tmp_path, HOME_FS)


def test_one_job_fills_its_own_disk_and_its_neighbours_pass(tmp_path: Path, loop_home: Path) -> None:
    project = project_copy(tmp_path / "project")
    (project / "tasks" / "writer").mkdir()
    (project / "tasks" / "writer" / "TASK.md").write_text(WRITER_TASK)
    # flower's resume prompt, as a woken session's request carries it
    (project / "scenarios" / "disk.toml").write_text(SCENARIO)
    name = f"fb36-disk-{os.getpid()}"
    (project / "jobs.toml").write_text(JOBS_TOML.format(name=name))
    command = [
        "matrix",
        str(project / "jobs.toml"),
        "-j",
        "3",
        "--image",
        runtime_image(),
        "--reserve",
        "64m",
    ]

    first = fb(*command, home=loop_home, cwd=project, timeout=300)
    out = first.stdout + first.stderr
    assert "Traceback" not in out, out
    batch = loop_home / name
    records = {p.parent.name: json.loads(p.read_text()) for p in batch.glob("*/record.json")}
    writer = records["writer.r1"]
    assert (writer["status"], writer["class"]) == ("disk", "disk"), writer
    assert 'limit of 96m (disk = "96m")' in writer["reason"] and "workspace/big.bin" in writer["reason"], (
        writer
    )
    assert writer["attempt"] == 1  # never retried as infrastructure
    neighbours = [r for job, r in records.items() if job != "writer.r1"]
    assert len(neighbours) == 2 and all(r["status"] == "passed" for r in neighbours), neighbours
    assert (batch / "report" / "results.json").is_file() and (batch / "report" / "junit.xml").is_file()
    # The writer's files came back to the host: what it wrote, bounded by its disk
    big = batch / "writer.r1" / "workspace" / "big.bin"
    assert 60 * 1024**2 < big.stat().st_size <= 96 * 1024**2
    assert first.returncode == 1, out  # not all passed; no infrastructure error (3)
    # Nothing of the disks is left: no image file, no volume or holder, no loop device on them
    assert not list(batch.glob("*/disk.img"))
    assert not leftovers(loop_home, name), leftovers(loop_home, name).describe()
    loops = subprocess.run(["losetup", "-l", "-n", "-O", "BACK-FILE"], capture_output=True, text=True).stdout
    assert str(batch) not in loops, loops

    again = fb(*command, home=loop_home, cwd=project, timeout=120)
    assert "3 kept, 0 to run" in again.stdout + again.stderr, again.stdout + again.stderr
    kept = {p.parent.name: json.loads(p.read_text()) for p in batch.glob("*/record.json")}
    assert kept == records

    # 2. The home under its reserve, then full to the last block, then freed.
    full_name = f"fb36-full-{os.getpid()}"
    (project / "full.toml").write_text(FULL_TOML.format(name=full_name))
    full = ["matrix", str(project / "full.toml"), "-j", "2", "--image", runtime_image(), "--reserve", "100m"]
    ballast = loop_home / "ballast"
    fill_disk(ballast, leave=40 * 1024**2)
    skipped = fb(*full, home=loop_home, cwd=project, timeout=120)
    text = skipped.stdout + skipped.stderr
    assert "Traceback" not in text and skipped.returncode == 3, text
    for job in ("one.r1", "two.r1"):
        record = json.loads((loop_home / full_name / job / "record.json").read_text())
        assert record["status"] == "skipped" and "under its reserve of 100.0 MiB" in record["reason"], record
        assert record["attempt"] == 1
    fill_disk(loop_home / "ballast2", leave=0)
    crashed = fb(*full, home=loop_home, cwd=project, timeout=120)
    text = crashed.stdout + crashed.stderr
    assert "Traceback" not in text and crashed.returncode == 3, text
    lines = [line for line in text.splitlines() if line.startswith("flower-batch:")]
    assert len(lines) == 1 and "no space left on the disk" in lines[0], text
    for record_path in loop_home.glob("*/*/record.json"):
        assert json.loads(record_path.read_text())["status"] not in ("running", "queued"), record_path
    ballast.unlink()
    (loop_home / "ballast2").unlink()
    freed = fb(*full, home=loop_home, cwd=project, timeout=180)
    assert freed.returncode == 0, freed.stdout + freed.stderr
    assert "0 kept, 2 to run" in freed.stderr
    assert json.loads((batch / "writer.r1" / "record.json").read_text()) == writer  # kept

    # 3. A persistent job running when the home falls under its reserve: paused, then continued.
    (project / "tasks" / "pause").mkdir()
    (project / "tasks" / "pause" / "TASK.md").write_text("# PAUSE-TASK\n\nThink, then write alpha.\n")
    pause_name = f"fb36-pause-{os.getpid()}"
    (project / "pause.toml").write_text(PAUSE_TOML.format(name=pause_name))
    pause = [
        "matrix",
        str(project / "pause.toml"),
        "-j",
        "1",
        "--image",
        runtime_image(),
        "--reserve",
        "100m",
    ]
    pauser = Job(loop_home, pause_name, "pauser.r1")
    proc = fb_start(*pause, home=loop_home, cwd=project, log=tmp_path / "pause.log")
    # its first request answered: it is at work (its next answer takes a minute)
    wait_for("the pauser's first answer", lambda: len(pauser.gateway_log()) >= 1, timeout=120)
    fill_disk(ballast, leave=40 * 1024**2)
    assert proc.wait(timeout=120) == 4, (tmp_path / "pause.log").read_text()
    paused = pauser.record()
    assert paused["status"] == "paused" and paused["reason"].startswith("paused at the home's reserve"), (
        paused
    )
    session = pauser.lineage()
    # what the woken session reads differs, so the model answers at once this time
    (pauser.root / "workspace" / "TASK.md").write_text("# PAUSE-TASK, WOKEN\n\nWrite alpha.\n")
    ballast.unlink()
    woken = fb(*pause, home=loop_home, cwd=project, timeout=180)
    assert woken.returncode == 0, woken.stdout + woken.stderr
    done = pauser.record()
    assert done["status"] == "passed" and not (pauser.root / "attempts").exists(), done
    # one session throughout: the woken run's requests carry the session the paused one began
    assert pauser.lineage()["steps"]["do"] == session["steps"]["do"]
    assert {r["session"] for r in pauser.gateway_log() if r.get("endpoint") == "messages"} == {
        session["steps"]["do"]
    }
