"""flower-batch on a real multi-node Swarm (issue 13): the 3-node Docker-in-Docker test cluster
of scripts/cluster/ (tests/batch_fixtures/swarm.py brings it up once, or reuses it).

An 8-job matrix spread over the nodes, a `wake` landing on another node and continuing the same
session, a worker stopped under a running job (a record saying so, a re-run picking it up),
and `gc` removing what a SIGKILLed orchestrator left across the swarm.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flower.scripted import MessagesServer
from flower_batch.gateway.tokens import job_token
from tests.batch_fixtures.rig import (
    BATCH,
    FLOWER_BATCH,
    LEASE,
    MANAGED,
    PROJECT,
    REPO,
    ROLE,
    STARTED,
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
from tests.gateway_fixtures.upstream import PROJECT as GATEWAY_PROJECT
from tests.gateway_fixtures.upstream import Counting

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


def jobs_file(
    project: Path,
    name: str,
    *,
    variants: str = '["solo", "duo"]',
    repeat: int = 4,
    scenario: str = "quick.toml",
    timeout: str = "4m",
    placement: str = "",
    workspace: str = "alpha",
) -> Path:
    batch = f"{name}-{project.name.split('-')[1]}"  # unique per test home: no debris of another run counts
    path = project / f"{batch}.toml"
    path.write_text(
        MATRIX.format(
            name=batch,
            variants=variants,
            repeat=repeat,
            scenario=scenario,
            timeout=timeout,
            placement=placement,
            workspace=workspace,
        )
    )
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
    """Services, networks and secrets carrying our labels for `batch`, as the manager sees them;
    the tasks of its services (removed ones included) the manager still holds; and the
    containers on every node (a storage probe's too: it carries the batch's label)."""
    flt = f"label={BATCH}={batch}"
    found = {
        kind: c.manager(kind, "ls", "-q", "--filter", flt, "--filter", f"label={MANAGED}=1").split()
        for kind in ("service", "network", "secret")
    }
    found["task"] = tasks_of(c, batch)
    found["container"] = [
        f"{node}:{cid}"
        for node in ("manager", "worker1", "worker2")
        for cid in c.node_exec(node, "docker", "ps", "-aq", "--filter", flt).split()
    ]
    return found


def all_tasks(c: Cluster) -> list[dict[str, Any]]:
    """Every task the manager holds, of removed services too."""
    import docker

    api = docker.APIClient(base_url=c.docker_host)
    try:
        return list(api.tasks())
    finally:
        api.close()


def tasks_of(c: Cluster, batch: str) -> list[str]:
    return [
        t["ID"]
        for t in all_tasks(c)
        if ((t.get("Spec") or {}).get("ContainerSpec") or {}).get("Labels", {}).get(BATCH) == batch
    ]


def nothing_left(c: Cluster, batch: str) -> bool:
    """Nothing of `batch` on the swarm (an overlay network the manager removed can be listed for a
    few seconds more, while the nodes let go of it)."""
    try:
        wait_for(
            f"nothing of {batch} on the swarm",
            lambda: not any(on_swarm(c, batch).values()),
            timeout=60,
            every=1,
        )
    except AssertionError:
        return False
    return True


def held_reservations(c: Cluster) -> list[str]:
    """Tasks of flower-batch services (removed ones included) that still hold a reservation in
    the eyes of Swarm's constraint enforcer (desired state at most "complete") though they ended."""
    return [
        t["ID"]
        for t in all_tasks(c)
        if MANAGED in (t["Spec"]["ContainerSpec"].get("Labels") or {})
        and t["DesiredState"]
        in ("assigned", "accepted", "preparing", "ready", "starting", "running", "complete")
        and t["Status"]["State"] in ("complete", "failed", "shutdown", "rejected")
        and (t["Spec"].get("Resources") or {}).get("Reservations")
    ]


@pytest.fixture(scope="module")
def spread(swarm: Cluster) -> Iterator[tuple[Path, str, subprocess.CompletedProcess[str]]]:
    """One 8-job matrix with cpu/memory reservations, -j 8: what several tests read."""
    home = swarm.home()
    project = project_copy(home.with_name(home.name + "-project"))  # not under pytest's rotated tmp
    path = jobs_file(project, "spread")
    done = fb_swarm(swarm, "matrix", path, "-j", "8", "--image", swarm.image_id, home=home)
    yield home, path.stem, done
    kill_started()


def test_matrix_spreads_over_the_nodes(swarm: Cluster, spread: tuple[Path, str, Any]) -> None:
    home, batch, done = spread
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
    # every job and check reserved its cpus/memory, and every ended task let go of them: no task
    # is left that Swarm's constraint enforcer would count (a replicated-job's would be)
    assert held_reservations(swarm) == []


def test_a_job_of_the_swarm_reproduces_on_any_node(swarm: Cluster, spread: tuple[Path, str, Any]) -> None:
    home, batch, done = spread
    assert done.returncode == 0, done.stderr[-3000:]
    original = records(home, batch)["alpha.duo.r2"]
    proc = fb_swarm(swarm, "repro", f"{batch}/alpha.duo.r2", home=home, timeout=400)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "reproduction identical" in proc.stdout
    (path,) = (home / "repro").glob(f"{batch}.alpha.duo.r2.r1/record.json")
    rec = json.loads(path.read_text())
    assert rec["status"] == "passed" and rec["gateway_mode"] == "replay" and rec["backend"] == "swarm"
    assert rec["image_id"] == original["image_id"] and rec["node"].startswith(f"{PREFIX}-"), rec
    report = json.loads((path.parent / "repro.json").read_text())
    assert report["identical"] and report["files"]["original"] == report["files"]["repro"]
    assert report["replay"]["served"] == report["replay"]["recorded"] > 0
    assert nothing_left(swarm, "repro"), on_swarm(swarm, "repro")


def test_a_reservation_no_node_can_hold_is_refused_in_preflight(swarm: Cluster, home: Path) -> None:
    project = project_copy(home.with_name(home.name + "-project"))
    path = jobs_file(project, "huge", variants='["solo"]', repeat=1)
    # more memory than any node has (above the manager's own engine too: its limits only warn)
    path.write_text(path.read_text().replace('memory = "1g"', 'memory = "4000g"'))
    done = fb_swarm(swarm, "matrix", path, "--image", swarm.image_id, home=home, timeout=300)
    assert done.returncode == 2, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if "no node of the cluster can hold it" in x]
    assert line.startswith(f'flower-batch: {path.name}: memory "4000g" (task alpha, 1 job): '), line
    assert "it reserves 0.5 CPUs and 4000.0 GiB but no node has that much (the largest, " in line
    assert "lower `cpus`/`memory` in jobs.toml" in line and "Traceback" not in done.stderr
    assert not (home / path.stem).exists()  # refused before anything was written
    assert nothing_left(swarm, path.stem), on_swarm(swarm, path.stem)


def test_wake_lands_on_another_node_and_continues_the_session(swarm: Cluster, home: Path) -> None:
    proc = fb_swarm_start(
        swarm,
        "run",
        PROJECT / "tasks" / "slow",
        "-f",
        "flows:solo",
        "--prompt",
        "Read TASK.md and do what it asks.",
        "--scenario",
        PROJECT / "scenarios" / "slow.toml",
        "--name",
        "sleeper",
        "--persistent",
        "--image",
        swarm.image_id,
        "--placement",
        "node.role==worker",
        home=home,
        cwd=PROJECT,
        log=home / "run.out",
    )
    job = Job(home, "adhoc", "sleeper")
    wait_for(
        "the job to stall at the model",
        lambda: any(r["rule"] == "stall" for r in job.gateway_log()) or proc.poll() is not None,
        timeout=240,
    )
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
    path = jobs_file(
        project,
        "lost",
        variants='["solo"]',
        repeat=1,
        scenario="steady.toml",
        placement=f'placement = ["node.hostname=={PREFIX}-worker2"]',
    )
    # --infra-retries 0: the default would run the job again at once, pinned to the node that is
    # down, and wait for it there; here the re-run comes once the worker is back.
    proc = fb_swarm_start(
        swarm,
        "matrix",
        path,
        "-j",
        "1",
        "--infra-retries",
        "0",
        "--image",
        swarm.image_id,
        home=home,
        log=home / "lost.out",
    )
    batch = path.stem
    job = Job(home, batch, "alpha.solo.r1")
    wait_for(
        "the job to talk to the model", lambda: job.gateway_log() or proc.poll() is not None, timeout=240
    )
    host_env = script_env()
    subprocess.run(
        ["docker", "stop", "-t", "1", f"{PREFIX}-worker2"], check=True, capture_output=True, env=host_env
    )
    try:
        proc.wait(timeout=180)
        rec = job.record()
        assert rec["status"] == "error" and rec["node"] == f"{PREFIX}-worker2", rec
        assert f"node {PREFIX}-worker2 was lost" in rec["reason"], rec["reason"]
    finally:  # the worker comes back (same engine data: it rejoins as itself)
        subprocess.run(
            [str(Path(__file__).resolve().parents[4] / "scripts" / "cluster" / "up.sh")],
            check=True,
            capture_output=True,
            timeout=600,
            env={**host_env, "SHARED": shared_folders()},
        )
    wait_for(
        "worker2 to be ready",
        lambda: (
            "Ready"
            in swarm.manager("node", "ls", "--filter", f"name={PREFIX}-worker2", "--format", "{{.Status}}")
        ),
        timeout=120,
        every=1,
    )
    again = fb_swarm(swarm, "matrix", path, "-j", "1", "--image", swarm.image_id, home=home)
    assert again.returncode == 0, again.stderr[-3000:]
    rec = job.record()
    assert rec["status"] == "passed" and rec["node"] == f"{PREFIX}-worker2" and rec["attempt"] == 2, rec
    assert nothing_left(swarm, batch), on_swarm(swarm, batch)


def test_gc_removes_what_a_killed_orchestrator_left_across_the_swarm(swarm: Cluster, home: Path) -> None:
    """Also: every job's gateway token, the batch secret and a job's own secret are Swarm
    secrets, so no `docker service inspect` nor any node's `docker inspect` holds a value while
    the job's process has each; gc removes those secrets too."""
    project = project_copy(home.with_name(home.name + "-project"))  # not under pytest's rotated tmp
    path = jobs_file(
        project, "orphans", variants='["solo"]', repeat=2, scenario="slow.toml", workspace="slow"
    )
    own = "fb-swarm-test-secret-" + uuid.uuid4().hex
    path.write_text(
        path.read_text().replace(
            'check_timeout = "60s"', 'check_timeout = "60s"\nsecrets = ["FB_TEST_SECRET"]'
        )
    )
    log = home / "orphans.out"
    proc = subprocess.Popen(
        [str(FLOWER_BATCH), "matrix", str(path), "-j", "2", "--image", swarm.image_id, "--home", str(home)],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        env={**swarm.env(), "FB_TEST_SECRET": own},
        start_new_session=True,
    )
    STARTED.append(proc)
    batch = path.stem
    jobs = [Job(home, batch, f"alpha.solo.r{i}") for i in (1, 2)]
    wait_for(
        "both jobs to stall",
        lambda: (
            all(any(r["rule"] == "stall" for r in j.gateway_log()) for j in jobs) or proc.poll() is not None
        ),
        timeout=240,
    )
    assert proc.poll() is None, log.read_text()
    tokens = secret_in_task(swarm, "job", batch, "ANTHROPIC_API_KEY")
    mine = secret_in_task(swarm, "job", batch, "FB_TEST_SECRET")
    (batch_secret,) = secret_in_task(swarm, "gateway", batch, "FB_GATEWAY_SECRET")
    assert mine == [own, own] and re.fullmatch(r"[0-9a-f]{64}", batch_secret)
    # each is its job's own token under that batch secret (the gateway accepted their calls)
    assert sorted(tokens) == sorted(job_token(batch_secret, f"alpha.solo.r{i}") for i in (1, 2))
    seen = inspect_everything(swarm)
    assert "ANTHROPIC_API_KEY_FILE=/run/secrets/ANTHROPIC_API_KEY" in seen  # we looked at the right things
    for value in (*tokens, own, batch_secret):
        assert value not in seen
    sigkill_group(proc)
    left = on_swarm(swarm, batch)
    # 4 services (the gateway, 2 jobs, the network's warm service), 1 network; secrets: the
    # batch secret, and each job's token and its own secret
    assert len(left["service"]) == 4 and len(left["network"]) == 1 and len(left["secret"]) == 5, left
    assert len(left["container"]) >= 3, left  # 2 jobs and the gateway, on the nodes
    sessions = {
        json.loads(swarm.manager("service", "inspect", s))[0]["Spec"]["Labels"][LEASE]
        for s in left["service"]
    }
    assert len(sessions) == 1
    dry = fb_swarm(swarm, "gc", "--dry-run", home=home)
    assert dry.returncode == 0 and "would remove 10 leaked" in dry.stderr, dry.stderr
    assert {k: v for k, v in on_swarm(swarm, batch).items() if k not in ("task", "container")} == {
        k: v for k, v in left.items() if k not in ("task", "container")
    }
    gone = fb_swarm(swarm, "gc", home=home)
    assert gone.returncode == 0 and "removed 10 leaked" in gone.stderr, gone.stderr
    assert nothing_left(swarm, batch), on_swarm(swarm, batch)


def inspect_everything(c: Cluster) -> str:
    """What `docker inspect` shows of every service (manager) and every container (each node)."""
    out = []
    services = c.manager("service", "ls", "-q").split()
    if services:
        out.append(c.manager("service", "inspect", *services))
    for node in ("manager", "worker1", "worker2"):
        containers = c.node_exec(node, "docker", "ps", "-aq").split()
        if containers:
            out.append(c.node_exec(node, "docker", "inspect", *containers))
    return "\n".join(out)


def secret_in_task(c: Cluster, role: str, batch: str, name: str) -> list[str]:
    """The value of /run/secrets/NAME in each running task of `role` in `batch`, read inside it."""
    values = []
    for node in ("manager", "worker1", "worker2"):
        for cid in c.node_exec(
            node,
            "docker",
            "ps",
            "-q",
            "--filter",
            f"label={ROLE}={role}",
            "--filter",
            f"label={BATCH}={batch}",
        ).split():
            values.append(c.node_exec(node, "docker", "exec", cid, "cat", f"/run/secrets/{name}"))
    return values


EGRESS_JOBS = """
[batch]
name = "{name}"
backend = "swarm"

[defaults]
workflow = "flows.py:quick"
prompt = "Read TASK.md and do what it asks."
timeout = "4m"
check_timeout = "60s"
memory = "1g"
cpus = 0.5
gateway = {{ mode = "anthropic" }}

[tasks.hello]
workspace = "tasks/hello"
check = "python3 egress.py {host} {port}"
"""

# Run as the job's check, on the job's network: the gateway answers, the outside does not.
EGRESS_PROBE = """
import socket, sys
def reach(host, port):
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect((host, port))
        return "reached"
    except OSError as exc:
        return f"blocked ({type(exc).__name__}: {exc})"
    finally:
        s.close()
print("gateway:", reach("gateway", 8080))
print("upstream:", reach(sys.argv[1], int(sys.argv[2])))
"""


def test_anthropic_mode_the_gateway_reaches_the_upstream_and_jobs_do_not(swarm: Cluster, home: Path) -> None:
    project = home.with_name(home.name + "-project")
    shutil.copytree(GATEWAY_PROJECT, project)
    (project / "tasks" / "hello" / "egress.py").write_text(EGRESS_PROBE)
    # the host as the nodes reach it: the gateway of the cluster's network
    host_ip = subprocess.run(
        ["docker", "network", "inspect", f"{PREFIX}-net", "-f", "{{(index .IPAM.Config 0).Gateway}}"],
        capture_output=True,
        text=True,
        check=True,
        env=script_env(),
    ).stdout.strip()
    key = "sk-ant-swarm-test-" + uuid.uuid4().hex
    counting = Counting()
    with MessagesServer(counting, host="0.0.0.0") as upstream:
        path = project / "egress.toml"
        batch = f"egress-{home.name.split('-')[1]}"
        path.write_text(EGRESS_JOBS.format(name=batch, host=host_ip, port=upstream.port))
        env = {
            **swarm.env(),
            "ANTHROPIC_API_KEY": key,
            "FLOWER_BATCH_UPSTREAM": f"http://{host_ip}:{upstream.port}",
        }
        done = subprocess.run(
            [str(FLOWER_BATCH), "matrix", str(path), "--image", swarm.image_id, "--home", str(home)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=project,
            env=env,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    rec = records(home, batch)["hello.r1"]
    assert rec["status"] == "passed" and rec["gateway_mode"] == "anthropic" and rec["backend"] == "swarm", rec
    # the gateway, and only it, had a route out: every model call went upstream with the host's key
    assert counting.count >= 1 and set(counting.credentials) == {hashlib.sha256(key.encode()).hexdigest()}
    # the job's network is internal: from it the gateway answers and the upstream cannot be reached
    out = rec["check_output"]
    assert "gateway: reached" in out and "upstream: blocked" in out, out
    for p in home.rglob("*"):
        if p.is_file():
            assert key.encode() not in p.read_bytes(), p
    assert nothing_left(swarm, batch), on_swarm(swarm, batch)


def test_a_node_holding_other_bytes_under_the_pinned_digest_is_refused(swarm: Cluster, home: Path) -> None:
    node = f"{PREFIX}-worker2"
    host_env = script_env()
    subprocess.run(
        ["docker", "cp", str(REPO / "tests" / "batch_fixtures" / "node_drift.sh"), f"{node}:/tmp/"],
        check=True,
        capture_output=True,
        env=host_env,
    )
    swarm.node_exec("worker2", "/tmp/node_drift.sh", "make", swarm.reference)
    try:
        wait_for(
            "worker2 to be ready",
            lambda: (
                "Ready" in swarm.manager("node", "ls", "--filter", f"name={node}", "--format", "{{.Status}}")
            ),
            timeout=120,
            every=1,
        )
        project = project_copy(home.with_name(home.name + "-project"))
        path = jobs_file(
            project,
            "drift",
            variants='["solo"]',
            repeat=1,
            placement=f'placement = ["node.hostname=={node}"]',
        )
        done = fb_swarm(swarm, "matrix", path, "--image", swarm.image_id, home=home, timeout=400)
    finally:
        swarm.node_exec("worker2", "/tmp/node_drift.sh", "undo", swarm.reference)
        # its engine restarted: Swarm has it down for a while, and later tests need it back
        wait_for(
            "worker2 to be ready again",
            lambda: (
                "Ready" in swarm.manager("node", "ls", "--filter", f"name={node}", "--format", "{{.Status}}")
            ),
            timeout=300,
            every=1,
        )
    assert done.returncode != 0
    job = Job(home, path.stem, "alpha.solo.r1")
    rec = job.record()
    key = json.loads(swarm.manager("image", "inspect", swarm.image_id))[0]["Config"]["Labels"][
        "org.flower-batch.build-key"
    ]
    assert rec["status"] == "error" and rec["node"] == node, rec
    assert rec["reason"].startswith(f"node {node} ran other bytes for job alpha.solo.r1: "), rec["reason"]
    assert (
        f": image build other-bytes, not the pinned {key[:12]} — remove the runtime image on {node}"
        in rec["reason"]
    )
    assert job.gateway_log() == []  # refused before the agent started: not one model call
    assert nothing_left(swarm, path.stem), on_swarm(swarm, path.stem)


def test_a_home_the_nodes_do_not_share_is_refused_before_anything_is_written(
    swarm: Cluster, home: Path
) -> None:
    """Pre-flight checks the storage from every node (a probe task on each): a home outside the
    cluster's shared folders is refused in one line naming it, before a folder of the batch is
    made or anything is scheduled, and the probe leaves nothing behind."""
    project = project_copy(home.with_name(home.name + "-project"))
    path = jobs_file(project, "unshared", variants='["solo"]', repeat=1)
    unshared = Path(f"/var/tmp/{PREFIX}-unshared-{uuid.uuid4().hex[:8]}")  # on this host only
    unshared.mkdir(parents=True)
    try:
        done = fb_swarm(swarm, "matrix", path, "--image", swarm.image_id, home=unshared, timeout=400)
        assert done.returncode == 2, done.stderr
        lines = [line for line in done.stderr.splitlines() if "is not shared storage seen by node" in line]
        assert len(lines) == 1 and lines[0].startswith(
            f"flower-batch: {unshared.resolve()} is not shared storage"
        ), done.stderr
        assert "use --home on such a mount" in lines[0]
        assert "Traceback" not in done.stderr
        assert not (unshared / path.stem).exists()  # no batch folder, no record
        assert not list(unshared.glob(".fb-storage-probe/*"))
        assert nothing_left(swarm, path.stem), on_swarm(swarm, path.stem)
        assert not swarm.manager("service", "ls", "-q", "--filter", f"label={ROLE}=probe").split()
    finally:
        shutil.rmtree(unshared, ignore_errors=True)


def _running_gateway(c: Cluster, session: str) -> tuple[str, str] | None:
    """(node hostname, container id) of the gateway task of an orchestrator session, if running."""
    import docker

    api = docker.APIClient(base_url=c.docker_host)
    try:
        services = api.services(filters={"label": [f"{ROLE}=gateway", f"{LEASE}={session}"]})
        for service in services:
            for t in api.tasks(filters={"service": service["ID"]}):
                cid = (t["Status"].get("ContainerStatus") or {}).get("ContainerID")
                if t["Status"]["State"] == "running" and cid:
                    return api.inspect_node(t["NodeID"])["Description"]["Hostname"], cid
    finally:
        api.close()
    return None


def test_a_gateway_killed_on_its_node_is_seen_restarted_and_the_job_finishes_exactly_metered(
    swarm: Cluster, home: Path
) -> None:
    """Swarm restarts the gateway's service itself, replacing the dead task at once; the death
    must still reach the job's record (the supervisor waits for the task it watched, not the
    newest), and the conversation goes on in its session, metered exactly."""
    from bench import soakjob

    turns = 12
    # a second an answer: the kill (found and sent through the manager, about 2 s) must land
    # while the job still talks to the gateway, not after its last turn
    files = soakjob.write_project(
        home.with_name(home.name + "-soak"), leg=turns, handoff_at=None, delay_s=1.0
    )
    proc = fb_swarm_start(
        swarm,
        "run",
        files["workspace"],
        "-f",
        f"{files['flows']}:main",
        "--prompt",
        soakjob.PROMPT,
        "--scenario",
        files["scenario"],
        "--persistent",
        "--name",
        "gwkill",
        "--image",
        swarm.image_id,
        "--timeout",
        "10m",
        home=home,
        log=home / "gwkill.out",
    )
    job = Job(home, "adhoc", "gwkill")

    def served() -> int:
        return sum(1 for r in job.gateway_log() if r.get("endpoint") == "messages" and r.get("status") == 200)

    wait_for("half the turns", lambda: served() >= turns // 2 or proc.poll() is not None, timeout=300)
    assert proc.poll() is None, (home / "gwkill.out").read_text()
    found = _running_gateway(swarm, job.record()["session"])
    assert found is not None
    node, container = found
    swarm.node_exec(node.removeprefix(f"{PREFIX}-"), "docker", "kill", container)
    assert proc.wait(timeout=300) == 0, (home / "gwkill.out").read_text()
    record = job.record()
    assert record["status"] == "passed", record
    health = record["gateway_health"]
    assert health["restarts"] == 1 and health["gave_up"] is None, health
    assert [d["exit_code"] for d in health["deaths"]] == [137], health
    log = job.gateway_log()
    assert {r["session"] for r in log if r.get("endpoint") == "messages"} == {job.lineage()["steps"]["count"]}
    expected = soakjob.expected_of_one_leg(files["scenario"], log, turns)
    meter = json.loads((job.root / "logs" / "meter.json").read_text())
    assert expected.accepts(meter, unlogged_starts=1), (meter, expected)
    assert nothing_left(swarm, "adhoc"), on_swarm(swarm, "adhoc")
