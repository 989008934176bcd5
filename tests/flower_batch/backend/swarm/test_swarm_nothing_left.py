"""Nothing of a batch stays on any node of the swarm (issue 22): no service, task, secret or
network as the manager sees them, and no container nor network on any node's own engine —
after a normal run, and after `gc` once its orchestrator was SIGKILLed mid-run, including a
container only a node still holds (the manager lists no service for it), which `gc` finds by
looking on the nodes themselves."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.batch_fixtures.rig import (
    BATCH,
    LEASE,
    MANAGED,
    ROLE,
    Job,
    kill_started,
    project_copy,
    sigkill_group,
    wait_for,
)
from tests.batch_fixtures.swarm import PREFIX, Cluster, cluster, fb_swarm, fb_swarm_start
from tests.flower_batch.backend.swarm.test_swarm_cluster import jobs_file, tasks_of

pytestmark = [pytest.mark.swarm, pytest.mark.slow]

NODES = ("manager", "worker1", "worker2")


@pytest.fixture(scope="module")
def swarm() -> Cluster:
    return cluster()


@pytest.fixture
def home(swarm: Cluster) -> Iterator[Path]:
    root = swarm.home()
    yield root
    kill_started()


def everywhere(c: Cluster, batch: str) -> dict[str, list[str]]:
    """Everything carrying the batch's label: the manager's services, secrets, networks and
    tasks (of removed services too), and each node's containers and networks, asked of the
    node's own engine."""
    flt = f"label={BATCH}={batch}"
    found = {
        kind: c.manager(kind, "ls", "-q", "--filter", flt).split()
        for kind in ("service", "network", "secret")
    }
    found["task"] = tasks_of(c, batch)
    for node in NODES:
        found[f"{node} container"] = c.node_exec(node, "docker", "ps", "-aq", "--filter", flt).split()
        found[f"{node} network"] = c.node_exec(node, "docker", "network", "ls", "-q", "--filter", flt).split()
    return {k: v for k, v in found.items() if v}


def nothing_of(c: Cluster, batch: str) -> dict[str, list[str]]:
    """{} once nothing of `batch` is anywhere (a node lets go of a removed overlay network and
    the manager of a removed service's tasks a few seconds later); else what is still there."""
    try:
        wait_for(f"nothing of {batch} anywhere", lambda: not everywhere(c, batch), timeout=60, every=1)
    except AssertionError:
        return everywhere(c, batch)
    return {}


def test_a_finished_matrix_leaves_nothing_on_any_node(swarm: Cluster, home: Path) -> None:
    project = project_copy(home.with_name(home.name + "-project"))
    path = jobs_file(project, "clean", variants='["solo"]', repeat=3)
    done = fb_swarm(swarm, "matrix", path, "-j", "3", "--image", swarm.image_id, home=home)
    assert done.returncode == 0, done.stderr[-3000:]
    assert nothing_of(swarm, path.stem) == {}


def test_gc_after_a_sigkilled_orchestrator_leaves_nothing_on_any_node(swarm: Cluster, home: Path) -> None:
    project = project_copy(home.with_name(home.name + "-project"))
    path = jobs_file(project, "killed", variants='["solo"]', repeat=2, scenario="slow.toml", workspace="slow")
    batch = path.stem
    proc = fb_swarm_start(
        swarm, "matrix", path, "-j", "2", "--image", swarm.image_id, home=home, log=home / "killed.out"
    )
    jobs = [Job(home, batch, f"alpha.solo.r{i}") for i in (1, 2)]
    wait_for(
        "both jobs to run",
        lambda: all(j.gateway_log() for j in jobs) or proc.poll() is not None,
        timeout=600,  # a loaded machine: the nodes are containers sharing its cores
    )
    assert proc.poll() is None, (home / "killed.out").read_text()
    services = swarm.manager("service", "ls", "-q", "--filter", f"label={BATCH}={batch}").split()
    labels = [json.loads(swarm.manager("service", "inspect", s))[0]["Spec"]["Labels"] for s in services]
    (lease,) = {lab[LEASE] for lab in labels}
    # the gateway, both jobs, and what keeps their overlay network up on every node
    assert sorted(lab[ROLE] for lab in labels) == ["gateway", "job", "job", "warm"], labels
    # What only a node holds: a container of this lease with no service behind it (as a
    # `global-job` probe's were, or a node's cut off while its service was removed).
    planted = swarm.node_exec(
        "worker2",
        "docker",
        "run",
        "-d",
        *("--label", f"{MANAGED}=1", "--label", f"{LEASE}={lease}", "--label", f"{BATCH}={batch}"),
        *("--label", f"{ROLE}=job", "--name", f"fb-left-{lease}"),
        swarm.reference,
        "sleep",
        "600",
    ).strip()
    sigkill_group(proc)
    left = everywhere(swarm, batch)
    assert len(left["service"]) == 4 and left["network"] and left["secret"], left
    assert planted[:12] in left["worker2 container"], left
    lock = home / ".sessions" / f"{lease}.lock"
    assert lock.exists()

    dry = fb_swarm(swarm, "gc", "--dry-run", home=home)
    assert dry.returncode == 0, dry.stderr
    assert f"would remove container {PREFIX}-worker2:fb-left-{lease} job" in dry.stdout, dry.stdout
    assert swarm.node_exec("worker2", "docker", "ps", "-aq", "--filter", f"id={planted}").strip()

    gone = fb_swarm(swarm, "gc", home=home)
    assert gone.returncode == 0, gone.stderr
    assert f"-worker2:fb-left-{lease}" in gone.stdout, gone.stdout
    assert "could not look" not in gone.stderr, gone.stderr
    assert nothing_of(swarm, batch) == {}
    assert not lock.exists()
    again = fb_swarm(swarm, "gc", home=home)
    assert again.returncode == 0 and "removed 0 leaked" in again.stderr, again.stderr
