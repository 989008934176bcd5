"""Every task in its own environment, on the swarm (issue 33): a matrix of two jobs, one in the
Debian 13 test image and one in an image built from a folder, runs on the 3-node test cluster.
The runtime is layered onto each task image on the manager, pushed to the cluster's registry,
and each job's service runs that digest: the agent's Bash sees its image's own python3, the
record names the task image and the digest, and nothing of the batch is left on any node; `repro` of a job replays in the image its record
pinned, on the same digest; then `gc --images --batch` removes the layered copies (and the build) from the manager. An image
flower cannot run in, a missing one and a failing build are each one line, before anything of
the batch is written or pushed."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower_batch.labels import LAYERED, TASK_BUILD
from tests.batch_fixtures.rig import kill_started, one_line_error
from tests.batch_fixtures.swarm import PREFIX, Cluster, cluster, fb_swarm
from tests.batch_fixtures.task_images import DEBIAN13, MUSL, ensure
from tests.flower_batch.backend.swarm.test_swarm_nothing_left import nothing_of
from tests.flower_batch.running.test_task_images_on_docker import FLOWS, SCENARIO

pytestmark = [pytest.mark.swarm, pytest.mark.docker, pytest.mark.slow]

# The build folder's python3 is its own: a script ahead of Debian's on PATH.
BUILT_PYTHON = "Python of the build folder"
BUILD = f"FROM {DEBIAN13}\nRUN printf '#!/bin/sh\\necho \"{BUILT_PYTHON}\"\\n' > /usr/local/bin/python3 \\\n && chmod 755 /usr/local/bin/python3\n"
JOBS = """
[batch]
name = "{name}"
backend = "swarm"

[defaults]
workspace = "ws"
workflow = "flows:where"
prompt = "where"
timeout = "4m"
gateway = {{ mode = "scripted", scenario = "scenario.toml" }}
{tasks}
"""
MATRIX_TASKS = f"""
[tasks.new]
image = "{DEBIAN13}"
check = "python3 -c 'import sys; assert sys.version_info[:2] == (3, 13)'"

[tasks.built]
build = "envs/built"
check = "grep -qx '{BUILT_PYTHON}' where.txt"
"""


@pytest.fixture(scope="module")
def swarm() -> Cluster:
    c = cluster()
    for tag in (DEBIAN13, MUSL):
        _load_into_manager(c, tag)
    return c


@pytest.fixture
def home(swarm: Cluster) -> Iterator[Path]:
    root = swarm.home()
    yield root
    kill_started()


def _load_into_manager(c: Cluster, tag: str) -> None:
    """The test image in the manager's engine, where a swarm batch looks its images up."""
    image_id = ensure(tag)
    try:
        if c.manager("image", "inspect", "-f", "{{.Id}}", tag).strip() == image_id:
            return
    except subprocess.CalledProcessError:
        pass
    host_env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    save = subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE, env=host_env)
    subprocess.run(
        ["docker", "load"], stdin=save.stdout, check=True, capture_output=True, timeout=600,
        env={**os.environ, "DOCKER_HOST": c.docker_host},
    )  # fmt: skip
    assert save.wait() == 0


def _project(home: Path, tasks: str) -> tuple[Path, str]:
    name = f"envs-{uuid.uuid4().hex[:6]}"
    root = home.with_name(home.name + "-project")
    (root / "ws").mkdir(parents=True, exist_ok=True)
    (root / "ws" / "TASK.md").write_text("Say where you are.\n")
    (root / "flows.py").write_text(FLOWS)
    (root / "scenario.toml").write_text(SCENARIO)
    (root / "envs" / "built").mkdir(parents=True, exist_ok=True)
    (root / "envs" / "built" / "Dockerfile").write_text(BUILD)
    (root / "envs" / "broken").mkdir(parents=True, exist_ok=True)
    (root / "envs" / "broken" / "Dockerfile").write_text(f"FROM {DEBIAN13}\nRUN exit 7\n")
    path = root / f"{name}.toml"
    path.write_text(JOBS.format(name=name, tasks=tasks))
    return path, name


def _registry_tags(c: Cluster) -> list[str]:
    """The layered images' tags in the cluster's registry, asked over HTTP from the host."""
    host_env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    address = subprocess.run(
        ["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}",
         f"{PREFIX}-registry"],
        capture_output=True, text=True, check=True, env=host_env,
    ).stdout.split()[0]  # fmt: skip
    try:
        with urllib.request.urlopen(f"http://{address}:5000/v2/flower-batch-task/tags/list", timeout=10) as r:
            return sorted(json.loads(r.read()).get("tags") or [])
    except urllib.error.HTTPError as exc:
        if exc.code == 404:  # no such repository yet
            return []
        raise


def _layered_on_manager(c: Cluster) -> list[str]:
    return sorted(set(c.manager("image", "ls", "-q", "--no-trunc", "--filter", f"label={LAYERED}").split()))


def test_a_matrix_in_two_task_images_runs_on_the_swarm_and_refusals_come_first(
    swarm: Cluster, home: Path
) -> None:
    # Refused in pre-flight, one line each: nothing of the batch written, nothing layered or pushed.
    tags_before, layered_before = _registry_tags(swarm), _layered_on_manager(swarm)
    for task, tasks, said in (
        ("alpine", f'[tasks.alpine]\nimage = "{MUSL}"\n', "has no glibc"),
        ("gone", '[tasks.gone]\nimage = "flower-batch-test:nowhere"\n', "is not in the Docker engine"),
        ("broken", '[tasks.broken]\nbuild = "envs/broken"\n', "the build of"),
    ):
        path, name = _project(home, tasks)
        refused = fb_swarm(swarm, "matrix", path, "--image", swarm.image_id, home=home, timeout=300)
        one_line_error(refused, f"task {task}", said)
        assert not (home / name).exists()
    assert _registry_tags(swarm) == tags_before and _layered_on_manager(swarm) == layered_before

    path, batch = _project(home, MATRIX_TASKS)
    done = fb_swarm(swarm, "matrix", path, "-j", "2", "--image", swarm.image_id, home=home, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    debian13 = swarm.manager("image", "inspect", "-f", "{{.Id}}", DEBIAN13).strip()
    ran = {}
    for task, python in (("new", "Python 3.13"), ("built", BUILT_PYTHON)):
        folder = home / batch / f"{task}.r1"
        record = json.loads((folder / "record.json").read_text())
        assert record["status"] == "passed" and record["backend"] == "swarm", record
        seen = (folder / "workspace" / "where.txt").read_text().splitlines()
        assert seen[0].startswith(python), seen  # the agent's Bash: its image's own python3
        pinned = record["spec"]["task_image"]
        assert pinned["origin"] == ("image" if task == "new" else "build")
        assert pinned["id"] == debian13 if task == "new" else pinned["ref"].endswith("envs/built")
        # ...and the digest that ran: that image with the runtime layered onto it, in the registry
        assert pinned["layered"].startswith(f"{swarm.registry}/flower-batch-task@sha256:"), pinned
        labels = json.loads(
            swarm.manager("image", "inspect", "-f", "{{json .Config.Labels}}", pinned["layered"])
        )
        assert labels[LAYERED] == f"{pinned['id']} {swarm.image_id}"
        ran[task] = pinned["layered"]
    assert len(set(ran.values())) == 2 and len(_registry_tags(swarm)) >= 2
    assert nothing_of(swarm, batch) == {}

    # repro on the swarm: in the task image the record pinned, on the same layered digest: the
    # same pair is never layered twice
    layered = _layered_on_manager(swarm)
    original = json.loads((home / batch / "built.r1" / "record.json").read_text())
    replayed = fb_swarm(swarm, "repro", f"{batch}/built.r1", home=home, timeout=400)
    assert replayed.returncode == 0, replayed.stdout[-2000:] + replayed.stderr[-2000:]
    assert "layering" not in replayed.stderr and _layered_on_manager(swarm) == layered, replayed.stderr
    (path,) = (home / "repro").glob(f"{batch}.built.r1.r1/record.json")
    again = json.loads(path.read_text())
    assert again["status"] == "passed" and again["backend"] == "swarm" and again["gateway_mode"] == "replay"
    assert again["spec"]["task_image"] == original["spec"]["task_image"], again["spec"]["task_image"]
    assert nothing_of(swarm, "repro") == {}

    ids = {swarm.manager("image", "inspect", "-f", "{{.Id}}", digest).strip() for digest in ran.values()}
    built = json.loads((home / batch / "built.r1" / "record.json").read_text())["spec"]["task_image"]
    cleaned = fb_swarm(swarm, "gc", "--images", "--batch", batch, home=home, timeout=300)
    assert cleaned.returncode == 0, cleaned.stderr
    assert not ids & set(_layered_on_manager(swarm)), cleaned.stdout
    assert built["id"] not in swarm.manager(
        "image", "ls", "-q", "--no-trunc", "--filter", f"label={TASK_BUILD}"
    )
