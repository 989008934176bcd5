"""The Swarm test rig: the 3-node Docker-in-Docker cluster of scripts/cluster/, brought up once
per test session (or reused when it is already up), with the runtime image of the current
sources loaded into its manager and pushed to its registry.

Tests marked `swarm` use it. With no Docker engine, or no debootstrap to make the node images,
they fail; they never pass as skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.batch_fixtures.rig import FLOWER_BATCH, REPO, command_env, runtime_image
from tests.batch_fixtures.swarm_health import Problem, Snapshot, gone, problem, snapshot
from tests.batch_fixtures.swarm_lock import ClusterLock, bring_up_path

# FB_TEST_SWARM_PREFIX names a second cluster (its nodes, network, env file and shared folder),
# so two checkouts on one machine can each run the swarm tests without touching the other's.
PREFIX = os.environ.get("FB_TEST_SWARM_PREFIX", "fbswarm")
ENV_FILE = REPO / "images" / ".cache" / ("cluster.env" if PREFIX == "fbswarm" else f"cluster-{PREFIX}.env")
SHARED = Path(
    os.environ.get(
        "FB_TEST_SWARM_SHARED",
        "/var/tmp/fb-swarm-tests" if PREFIX == "fbswarm" else f"/var/tmp/{PREFIX}-tests",
    )
)
BRING_UP_S = 900


@dataclass(frozen=True)
class Cluster:
    docker_host: str
    registry: str
    shared: Path
    """A folder every node mounts at the same path (test homes go below it)."""
    image_id: str
    reference: str
    """The runtime image's repo digest in the cluster's registry."""
    snap: Snapshot

    def env(self) -> dict[str, str]:
        return {
            **command_env(),
            "DOCKER_HOST": self.docker_host,
            "FLOWER_BATCH_REGISTRY": self.registry,
            "FLOWER_BATCH_BACKEND": "swarm",
        }

    def home(self) -> Path:
        home = self.shared / f"home-{uuid.uuid4().hex[:8]}"
        home.mkdir(parents=True)
        return home

    def node_exec(self, node: str, *cmd: str) -> str:
        """Run a command in a node container, on the HOST engine (the nodes are its containers)."""
        host_env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
        return subprocess.run(
            ["docker", "exec", f"{PREFIX}-{node}", *cmd],
            capture_output=True,
            text=True,
            check=True,
            env=host_env,
            timeout=120,
        ).stdout

    def manager(self, *cmd: str) -> str:
        """`docker CMD` against the manager's engine."""
        return subprocess.run(
            ["docker", *cmd],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            env={**os.environ, "DOCKER_HOST": self.docker_host},
        ).stdout


def script_env() -> dict[str, str]:
    """The host's environment for scripts/cluster/*.sh, naming this cluster."""
    host_env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    return {**host_env, "PREFIX": PREFIX, "ENV_FILE": str(ENV_FILE)}


def needed_folders() -> list[Path]:
    """What the tests need every node to mount: the test homes' folder (and any named in
    FLOWER_BATCH_CLUSTER_SHARED)."""
    return [SHARED, *map(Path, os.environ.get("FLOWER_BATCH_CLUSTER_SHARED", "").split())]


def shared_folders() -> str:
    """SHARED for up.sh: the needed folders and this checkout's default home (for `make` users)."""
    return " ".join(map(str, [*needed_folders(), REPO / "volumes"]))


_LOCK = ClusterLock(PREFIX)
_BRINGING_UP = ClusterLock(PREFIX, bring_up_path(PREFIX))
BACKGROUND_LOG = Path("/tmp") / f"flower-batch-cluster-{PREFIX}.background.log"


def _up() -> Snapshot:
    """Use the cluster as it is when it serves these tests, else, once no other session uses it,
    make it again; either way hold it (shared) for the rest of this process, so that nothing takes
    it down under the tests. A cluster that is up but not ours to remake fails in one line."""
    _LOCK.shared(timeout=BRING_UP_S)
    found = problem(PREFIX, needed_folders())
    if found is None:
        return snapshot(PREFIX)
    _refuse_if_whole(found)
    _LOCK.release()
    _LOCK.exclusive(timeout=BRING_UP_S)  # no test session uses it from here on
    try:
        found = problem(PREFIX, needed_folders())
        if found is not None:
            _refuse_if_whole(found)
            # missing, stopped or not answering, and nobody is using it: make it again
            env = {**script_env(), "CLUSTER_LOCK_HELD": "1"}
            subprocess.run([str(REPO / "scripts" / "cluster" / "down.sh")], check=True, timeout=300, env=env)
            SHARED.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [str(REPO / "scripts" / "cluster" / "up.sh")],
                check=True,
                timeout=BRING_UP_S,
                cwd=REPO,
                env={**env, "SHARED": shared_folders()},
            )
            after = problem(PREFIX, needed_folders())
            assert after is None, f"the test cluster {PREFIX} is not usable after up.sh: {after.text}"
    finally:
        _LOCK.shared(timeout=BRING_UP_S)  # from exclusive: nobody else got in between
    return snapshot(PREFIX)


def _refuse_if_whole(found: Problem) -> None:
    if found.whole:  # a working cluster someone made by hand: not ours to take down
        raise AssertionError(
            f"the test cluster {PREFIX} cannot serve the swarm tests: {found.text}; take it "
            "down (make cluster-down) or name another with FB_TEST_SWARM_PREFIX"
        )


_made: list[Cluster] = []
_failed: list[str] = []  # one bring-up per process: the next tests fail with its reason, fast


def cluster() -> Cluster:
    """The cluster, brought up (or found) once per process; a cluster that went away since fails
    here, saying why, instead of as an unreachable engine somewhere in a test."""
    if _made:
        why = gone(_made[0].snap)
        assert why is None, f"the test cluster {PREFIX} went away under this test session: {why}"
        return _made[0]
    assert not _failed, _failed[0]
    try:
        # waits while another process (the session's background bring-up: start_in_background)
        # brings it up; then the cluster is found up and the image already in its registry
        _BRINGING_UP.exclusive(2 * BRING_UP_S, f"the bring-up under way to end (log: {BACKGROUND_LOG})")
        try:
            return _bring_up()
        finally:
            _BRINGING_UP.release()
    except BaseException as exc:
        _failed.append(f"the test cluster {PREFIX} did not come up earlier in this session: {exc}")
        raise


def start_in_background(cluster_only: bool = False) -> bool:
    """Bring the cluster up (and, unless `cluster_only`, the image into its registry) in a child
    process, so that it comes up while the tests that need no cluster run (or, from `make test`,
    while the image builds: `cluster_only`, as the image is not there yet); the swarm tests'
    `cluster()` then waits for it. False when another process is already at it."""
    if not _BRINGING_UP.exclusive_now():
        return False
    log = BACKGROUND_LOG.open("w")
    fd = _BRINGING_UP.fileno()
    args = [str(fd), *(["--cluster-only"] if cluster_only else [])]
    subprocess.Popen(
        [sys.executable, "-m", "tests.batch_fixtures.swarm_background", *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
        pass_fds=(fd,),
    )
    log.close()
    _BRINGING_UP.hand_over()  # the child holds it until it exits, whatever becomes of this process
    return True


def bring_up_holding(fd: int, cluster_only: bool) -> str:
    """The background child's work, the bring-up lock already its own (inherited as `fd`)."""
    try:
        if cluster_only:
            return f"cluster {PREFIX} up, manager {_up().manager_id}"
        return f"cluster {PREFIX} up, image {_bring_up().reference} in its registry"
    finally:
        os.close(fd)


def _bring_up() -> Cluster:
    image_id = runtime_image()  # the current sources, built on the host engine
    snap = _up()
    host_env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    manager_env = {**host_env, "DOCKER_HOST": snap.docker_host}
    registry = f"{PREFIX}-registry:5000"
    has = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Id}}", image_id],
        capture_output=True,
        text=True,
        env=manager_env,
    )
    if has.returncode != 0:  # load it into the manager (only the layers it lacks are written)
        save = subprocess.Popen(["docker", "save", image_id], stdout=subprocess.PIPE, env=host_env)
        subprocess.run(
            ["docker", "load"],
            stdin=save.stdout,
            check=True,
            env=manager_env,
            capture_output=True,
            timeout=900,
        )
        assert save.wait() == 0
    pushed = subprocess.run(
        [str(FLOWER_BATCH), "image", "push", registry, "--image", image_id],
        capture_output=True,
        text=True,
        env=manager_env,
        timeout=900,
    )
    assert pushed.returncode == 0, pushed.stderr
    _made.append(
        Cluster(
            docker_host=snap.docker_host,
            registry=registry,
            shared=SHARED,
            image_id=image_id,
            reference=pushed.stdout.strip(),
            snap=snap,
        )
    )
    return _made[0]


def still_there() -> str | None:
    """After a swarm test: why the cluster this process uses went away, or None (also when this
    process never brought one up)."""
    return gone(_made[0].snap) if _made else None


def fb_swarm(
    c: Cluster, *args: str | Path, home: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """`flower-batch ARGS --home HOME` against the cluster's manager (DOCKER_HOST), backend swarm."""
    return subprocess.run(
        [str(FLOWER_BATCH), *map(str, args), "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=c.env(),
    )


def fb_swarm_start(
    c: Cluster, *args: str | Path, home: Path, log: Path, cwd: Path = REPO
) -> subprocess.Popen[str]:
    from tests.batch_fixtures.rig import STARTED

    out = log.open("w")
    proc = subprocess.Popen(
        [str(FLOWER_BATCH), *map(str, args), "--home", str(home)],
        stdout=out,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        env=c.env(),
        start_new_session=True,
    )
    STARTED.append(proc)
    return proc
