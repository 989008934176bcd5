"""flower-batch on a real multi-node Swarm (issue 13): the 3-node Docker-in-Docker test cluster
of scripts/cluster/ (tests/batch_fixtures/swarm.py brings it up once, or reuses it).

An 8-job matrix spread over the nodes, a `wake` landing on another node and continuing the same
session, a worker stopped under a running job (a record saying so, a re-run picking it up),
and `gc` removing what a SIGKILLed orchestrator left across the swarm.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.batch_fixtures.rig import (
    BATCH,
    MANAGED,
    PROJECT,
    SESSION,
    Job,
    kill_started,
    project_copy,
    sigkill_group,
    wait_for,
)
from tests.batch_fixtures.swarm import (
    PREFIX,
    Cluster,
    cluster,
    fb_swarm,
    fb_swarm_start,
    script_env,
    shared_folders,
)

pytestmark = [pytest.mark.swarm, pytest.mark.slow]

MATRIX = """
[batch]
name = "{name}"
backend = "swarm"

[defaults]
workflow = "flows:${{{{ matrix.variant }}}}"
prompt = "Read TASK.md and do what it asks."
timeout = "{timeout}"
check_timeout = "60s"
memory = "1g"
cpus = 0.5
gateway = {{ mode = "scripted", scenario = "scenarios/{scenario}" }}
{placement}

[tasks.alpha]
workspace = "tasks/{workspace}"
check = "grep -qx alpha answer.txt"

[matrix]
variant = {variants}
repeat = {repeat}
"""


def jobs_file(project: Path, name: str, *, variants: str = '["solo", "duo"]', repeat: int = 4,
              scenario: str = "quick.toml", timeout: str = "4m", placement: str = "",
              workspace: str = "alpha") -> Path:
    batch = f"{name}-{project.name.split('-')[1]}"  # unique per test home: no debris of another run counts
    path = project / f"{batch}.toml"
    path.write_text(MATRIX.format(name=batch, variants=variants, repeat=repeat, scenario=scenario,
                                  timeout=timeout, placement=placement, workspace=workspace))
    return path


@pytest.fixture(scope="module")
def swarm() -> Cluster:
    return cluster()


@pytest.fixture
def home(swarm: Cluster) -> Iterator[Path]:
    root = swarm.home()
    yield root
    kill_started()


def records(home: Path, batch: str) -> dict[str, dict[str, Any]]:
    return {p.parent.name: json.loads(p.read_text()) for p in (home / batch).glob("*/record.json")}


def on_swarm(c: Cluster, batch: str) -> dict[str, list[str]]:
    """Services, networks and secrets carrying our labels for `batch`, as the manager sees them."""
    flt = f"label={BATCH}={batch}"
    return {kind: c.manager(kind, "ls", "-q", "--filter", flt, "--filter", f"label={MANAGED}=1").split()
            for kind in ("service", "network", "secret")}


def nothing_left(c: Cluster, batch: str) -> bool:
    """Nothing of `batch` on the swarm (an overlay network the manager removed can be listed for a
    few seconds more, while the nodes let go of it)."""
    try:
        wait_for(f"nothing of {batch} on the swarm", lambda: not any(on_swarm(c, batch).values()), timeout=30,
                 every=1)
    except AssertionError:
        return False
    return True


def test_matrix_spreads_over_the_nodes(swarm: Cluster, home: Path) -> None:
    project = project_copy(home.with_name(home.name + "-project"))  # not under pytest's rotated tmp
    path = jobs_file(project, "spread")
    batch = path.stem
    done = fb_swarm(swarm, "matrix", path, "-j", "8", "--image", swarm.image_id, home=home)
    assert done.returncode == 0, done.stderr[-3000:]
    found = records(home, batch)
    assert len(found) == 8 and {r["status"] for r in found.values()} == {"passed"}, found
    assert {r["backend"] for r in found.values()} == {"swarm"}
    nodes = {r["node"] for r in found.values()}
    assert len(nodes) >= 2 and nodes <= {f"{PREFIX}-manager", f"{PREFIX}-worker1", f"{PREFIX}-worker2"}, nodes
    # the same table and reports as on one machine
    assert "8/8 passed (100%)" in done.stderr and "┃ task" in done.stdout
    results = json.loads((home / batch / "report" / "results.json").read_text())
    assert len(results["jobs"]) == 8
    assert nothing_left(swarm, batch), on_swarm(swarm, batch)


def test_wake_lands_on_another_node_and_continues_the_session(swarm: Cluster, home: Path) -> None:
    proc = fb_swarm_start(swarm, "run", PROJECT / "tasks" / "slow", "-f", "flows:solo", "--prompt",
                          "Read TASK.md and do what it asks.", "--scenario", PROJECT / "scenarios" / "slow.toml",
                          "--name", "sleeper", "--persistent", "--image", swarm.image_id,
                          "--placement", "node.role==worker", home=home, cwd=PROJECT,
                          log=home / "run.out")
    job = Job(home, "adhoc", "sleeper")
    wait_for("the job to stall at the model", lambda: any(r["rule"] == "stall" for r in job.gateway_log())
             or proc.poll() is not None, timeout=240)
    assert proc.poll() is None, (home / "run.out").read_text()
    session = job.lineage()["steps"]["do"]
    stopped = fb_swarm(swarm, "stop", "sleeper", "--grace", "5", home=home)
    assert stopped.returncode == 0, stopped.stderr
    proc.wait(timeout=120)
    first = job.record()
    assert first["status"] in ("failed", "error") and first["node"], first
    assert first["node"].startswith(f"{PREFIX}-worker")  # --placement node.role==worker
    swarm.manager("node", "update", "--availability", "drain", first["node"])
    try:
        woken = fb_swarm(swarm, "wake", "sleeper", home=home, timeout=300)
        assert woken.returncode == 0, woken.stderr[-3000:]
    finally:
        swarm.manager("node", "update", "--availability", "active", first["node"])
    rec = job.record()
    assert rec["status"] == "passed" and rec["attempt"] == 2 and rec["node"] not in (None, first["node"]), rec
    assert job.lineage()["steps"]["do"] == session and job.lineage()["woke"] == 2
    latest = [r for r in job.gateway_log() if r["endpoint"] == "messages"]
    assert latest[-1]["session"] == session and any(r["rule"] == "continued" for r in latest)
    assert nothing_left(swarm, "adhoc"), on_swarm(swarm, "adhoc")


def test_a_worker_stopped_mid_job_then_a_rerun_picks_it_up(swarm: Cluster, home: Path) -> None:
    project = project_copy(home.with_name(home.name + "-project"))  # not under pytest's rotated tmp
    path = jobs_file(project, "lost", variants='["solo"]', repeat=1, scenario="steady.toml",
                     placement=f'placement = ["node.hostname=={PREFIX}-worker2"]')
    # --infra-retries 0: pinned to the lost node, an automatic retry could only wait for it
    proc = fb_swarm_start(swarm, "matrix", path, "-j", "1", "--infra-retries", "0", "--image", swarm.image_id,
                          home=home, log=home / "lost.out")
    batch = path.stem
    job = Job(home, batch, "alpha.solo.r1")
    wait_for("the job to talk to the model", lambda: job.gateway_log() or proc.poll() is not None, timeout=240)
    host_env = script_env()
    subprocess.run(["docker", "stop", "-t", "1", f"{PREFIX}-worker2"], check=True, capture_output=True, env=host_env)
    try:
        proc.wait(timeout=180)
        rec = job.record()
        assert rec["status"] == "error" and rec["node"] == f"{PREFIX}-worker2", rec
        assert f"node {PREFIX}-worker2 was lost" in rec["reason"], rec["reason"]
    finally:  # the worker comes back (same engine data: it rejoins as itself)
        subprocess.run([str(Path(__file__).parents[1] / "scripts" / "cluster" / "up.sh")], check=True,
                       capture_output=True, timeout=600, env={**host_env, "SHARED": shared_folders()})
    wait_for("worker2 to be ready", lambda: "Ready" in swarm.manager(
        "node", "ls", "--filter", f"name={PREFIX}-worker2", "--format", "{{.Status}}"), timeout=120, every=1)
    again = fb_swarm(swarm, "matrix", path, "-j", "1", "--image", swarm.image_id, home=home)
    assert again.returncode == 0, again.stderr[-3000:]
    rec = job.record()
    assert rec["status"] == "passed" and rec["node"] == f"{PREFIX}-worker2" and rec["attempt"] == 2, rec
    assert nothing_left(swarm, batch), on_swarm(swarm, batch)


def test_gc_removes_what_a_killed_orchestrator_left_across_the_swarm(
    swarm: Cluster, home: Path
) -> None:
    project = project_copy(home.with_name(home.name + "-project"))  # not under pytest's rotated tmp
    path = jobs_file(project, "orphans", variants='["solo"]', repeat=2, scenario="slow.toml", workspace="slow")
    proc = fb_swarm_start(swarm, "matrix", path, "-j", "2", "--image", swarm.image_id, home=home,
                          log=home / "orphans.out")
    batch = path.stem
    jobs = [Job(home, batch, f"alpha.solo.r{i}") for i in (1, 2)]
    wait_for("both jobs to stall", lambda: all(any(r["rule"] == "stall" for r in j.gateway_log()) for j in jobs)
             or proc.poll() is not None, timeout=240)
    assert proc.poll() is None, (home / "orphans.out").read_text()
    sigkill_group(proc)
    left = on_swarm(swarm, batch)
    assert len(left["service"]) == 3 and len(left["network"]) == 1 and len(left["secret"]) == 1, left
    sessions = {json.loads(swarm.manager("service", "inspect", s))[0]["Spec"]["Labels"][SESSION]
                for s in left["service"]}
    assert len(sessions) == 1
    dry = fb_swarm(swarm, "gc", "--dry-run", home=home)
    assert dry.returncode == 0 and "would remove 5 leaked" in dry.stderr, dry.stderr
    assert on_swarm(swarm, batch) == left
    gone = fb_swarm(swarm, "gc", home=home)
    assert gone.returncode == 0 and "removed 5 leaked" in gone.stderr, gone.stderr
    assert nothing_left(swarm, batch), on_swarm(swarm, batch)
