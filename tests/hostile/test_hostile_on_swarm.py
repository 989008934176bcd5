"""The hostile job on the 3-node test swarm: the same attack.py from a job task on the batch's
overlay. What holds there (docs/security.md): no host address answers (the orchestrator's host,
as the nodes reach it, and each node), nor the internet, nor the other job's files; the uid is
not 0, no capability is left and pids.max is a number. What Swarm cannot give: no-new-privileges
(no such service setting before API 1.44), and a job task has an interface (the overlay it shares
with its gateway and its batch's other jobs)."""

from __future__ import annotations

import subprocess

import pytest

from flower_batch.untrusted_files import remove_tree
from tests.batch_fixtures.rig import kill_started
from tests.batch_fixtures.swarm import PREFIX, Cluster, cluster, fb_swarm, script_env
from tests.hostile.test_hostile_jobs import (
    ATTACKS,
    MARKER,
    attacks_of,
    host_addresses,
    host_listener,
    make_batch,
)

pytestmark = [pytest.mark.swarm, pytest.mark.slow]

__all__ = ["host_listener"]  # the fixture, shared with the local suite
NOT_ON_SWARM = {"no-new-privs", "net-interfaces", "net-name-gateway"}


def node_addresses(c: Cluster) -> tuple[list[str], str]:
    """Each node's addresses, and the host's on the cluster's network (its gateway)."""
    env = script_env()
    nodes = subprocess.run(
        ["docker", "ps", "--filter", f"name={PREFIX}-", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.split()
    found = [
        subprocess.run(
            ["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", n],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout.split()
        for n in nodes
    ]
    gateway = subprocess.run(
        ["docker", "network", "inspect", f"{PREFIX}-net", "-f", "{{(index .IPAM.Config 0).Gateway}}"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.strip()
    return sorted({a for addrs in found for a in addrs}), gateway


def test_a_job_task_on_the_overlay_reaches_no_host_and_holds_no_privilege(host_listener: int) -> None:
    c = cluster()
    nodes, host_on_cluster = node_addresses(c)
    home = c.home()
    outside = home.with_name(home.name + "-outside.txt")
    outside.write_text("outside secret\n")
    targets = {
        "host_addresses": sorted({*host_addresses(), host_on_cluster}),
        "host_port": host_listener,
        # each node's engine (the manager's is the swarm's): a job must never reach one
        "other_addresses": [[node, 2375] for node in nodes],
        "victim_marker": MARKER,
        "victim_job": "victim.r1",
        "outside_file": str(outside),
        "many_files": 1000,
        "depth": 50,
    }
    project = home.with_name(home.name + "-project")
    jobs = make_batch(project, f"hostile-{home.name.split('-')[1]}", ["attacker", "victim"], targets, "swarm")
    try:
        done = fb_swarm(
            c, "matrix", jobs, "-j", "2", "--image", c.image_id, "--fail-under", "0", home=home, timeout=900
        )
        assert done.returncode in (0, 1), done.stderr[-3000:]
        attacks = attacks_of(next(home.glob("hostile-*/attacker*")) / "workspace" / "attack.out")
        assert attacks, done.stderr[-3000:]
        wanted = (
            (ATTACKS - NOT_ON_SWARM)
            | {f"net-host-{a}" for a in targets["host_addresses"]}
            | {f"net-other-{n}:2375" for n in nodes}
        )
        assert wanted <= set(attacks), sorted(wanted - set(attacks))
        open_ = {n: a["detail"] for n, a in attacks.items() if not a["blocked"] and n not in NOT_ON_SWARM}
        assert open_ == {}
    finally:
        kill_started()
        for folder in (home, project):
            remove_tree(folder)
        outside.unlink(missing_ok=True)
