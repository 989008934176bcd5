"""The gateway on a full home, with a real job on Docker (issue 36): while the job's log folder
has no room for a meter line, its requests are refused as a transient overload (529), never sent
on unmetered; flower's resilience waits them out, and once space is freed the same job continues
in the same session and passes, every answered request metered.

As root like CI: the home is a loop filesystem of its own, filled by a ballast file."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower.catalogue.runtime import RESUME_PROMPT
from flower_batch.gateway.metering import read_meter
from tests.batch_fixtures.rig import (
    Job,
    fb_start,
    fill_disk,
    loop_home,
    project_copy,
    runtime_image,
    wait_for,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SCENARIO = f"""
description = "issue 36: the gateway refuses what it cannot meter"

[defaults]
usage = {{ input_tokens = 1000, output_tokens = 100 }}

[[rules]]
name = "resumed after the refusals: write the answer"
last_user_contains = "{RESUME_PROMPT[:12]}"
reply = [{{ tool_use = {{ name = "Write", input = {{ file_path = "{{cwd}}/answer.txt", content = "alpha\\n" }} }} }}]

[[rules]]
name = "read the task, slowly (the test fills the home meanwhile)"
last_is_tool_result = false
last_user_contains = "TASK.md"
reply = [{{ tool_use = {{ name = "Bash", input = {{ command = "sleep 4; cat TASK.md", description = "read" }} }} }}]

[[rules]]
name = "write the answer"
last_is_tool_result = true
tool_result_contains = "GATEWAY-TASK"
reply = [{{ tool_use = {{ name = "Write", input = {{ file_path = "{{cwd}}/answer.txt", content = "alpha\\n" }} }} }}]

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
timeout = "4m"
memory = "1g"
disk = "64m"
gateway = {{ mode = "scripted", scenario = "scenarios/gateway.toml" }}

[tasks.metered]
workspace = "tasks/gateway"
check = "grep -qx alpha answer.txt"
"""


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield from loop_home(tmp_path, 400 * 1024**2)


def test_the_gateway_refuses_what_it_cannot_meter_and_the_job_continues_once_there_is_room(
    tmp_path: Path, home: Path
) -> None:
    project = project_copy(tmp_path / "project")
    (project / "tasks" / "gateway").mkdir()
    (project / "tasks" / "gateway" / "TASK.md").write_text("# GATEWAY-TASK\n\nWrite alpha.\n")
    (project / "scenarios" / "gateway.toml").write_text(SCENARIO)
    name = f"fb36-gateway-{os.getpid()}"
    (project / "jobs.toml").write_text(JOBS_TOML.format(name=name))
    job = Job(home, name, "metered.r1")
    log = tmp_path / "matrix.log"
    # a small reserve: the home below the gateway's room to meter (4 MiB) but above the reserve
    # stops nothing that runs; only the gateway has to say no
    proc = fb_start(
        "matrix", project / "jobs.toml", "--image", runtime_image(), "--reserve", "1m",
        home=home, cwd=project, log=log,
    )  # fmt: skip
    wait_for("the job's first answer", lambda: len(job.gateway_log()) >= 1, timeout=120)
    ballast = home / "ballast"
    fill_disk(ballast, leave=3 * 1024**2)  # the next request (after `sleep 4`) finds no room
    # three refusals: the CLI's own two retries spent, so flower's resilience waits out the rest
    refused = wait_for(
        "three requests refused for want of room to meter them",
        lambda: [r for r in job.gateway_log() if r.get("rule") == "gateway:cannot-meter"][2:],
        timeout=90,
        every=0.5,
    )
    assert all(r["status"] == 529 for r in refused), refused
    ballast.unlink()
    assert proc.wait(timeout=180) == 0, log.read_text()

    record = job.record()
    assert record["status"] == "passed", record
    (step,) = job.manifest()
    assert step["ok"] and step["attempts"] >= 2, step  # flower resumed the refused turn
    # one session throughout: the refused turn was resumed, not started again
    answered = [r for r in job.gateway_log() if r.get("endpoint") == "messages" and r["status"] == 200]
    assert len({r["session"] for r in answered}) == 1 and answered[-1]["session"] == step["session_id"]
    # every request the model answered is metered, none twice, none missing
    meter = read_meter(job.root / "logs")
    assert meter is not None and meter.exchanges == len(answered) >= 3, (meter, len(answered))
    assert meter.tokens["input_tokens"] == 1000 * len(answered)
    assert json.loads((home / name / "report" / "results.json").read_text()), "the report is written"
