"""The Swarm test rig: the 3-node Docker-in-Docker cluster of scripts/cluster/, brought up once
per test session (or reused when it is already up), with the runtime image of the current
sources loaded into its manager and pushed to its registry.

Tests marked `swarm` use it. With no Docker engine, or no debootstrap to make the node images,
they fail; they never pass as skipped.
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.batch_fixtures.rig import FLOWER_BATCH, REPO, command_env, runtime_image

# FB_TEST_SWARM_PREFIX names a second cluster (its nodes, network, env file and shared folder),
# so two checkouts on one machine can each run the swarm tests without touching the other's.
PREFIX = os.environ.get("FB_TEST_SWARM_PREFIX", "fbswarm")
ENV_FILE = REPO / "images" / ".cache" / ("cluster.env" if PREFIX == "fbswarm" else f"cluster-{PREFIX}.env")
SHARED = Path(os.environ.get("FB_TEST_SWARM_SHARED",
                             "/var/tmp/fb-swarm-tests" if PREFIX == "fbswarm" else f"/var/tmp/{PREFIX}-tests"))


@dataclass(frozen=True)
class Cluster:
    docker_host: str
    registry: str
    shared: Path
    """A folder every node mounts at the same path (test homes go below it)."""
    image_id: str
    reference: str
    """The runtime image's repo digest in the cluster's registry."""

    def env(self) -> dict[str, str]:
        return {**command_env(), "DOCKER_HOST": self.docker_host, "FLOWER_BATCH_REGISTRY": self.registry,
                "FLOWER_BATCH_BACKEND": "swarm"}

    def home(self) -> Path:
        home = self.shared / f"home-{uuid.uuid4().hex[:8]}"
        home.mkdir(parents=True)
        return home

    def node_exec(self, node: str, *cmd: str) -> str:
        """Run a command in a node container, on the HOST engine (the nodes are its containers)."""
        host_env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
        return subprocess.run(["docker", "exec", f"{PREFIX}-{node}", *cmd], capture_output=True, text=True,
                              check=True, env=host_env, timeout=120).stdout

    def manager(self, *cmd: str) -> str:
        """`docker CMD` against the manager's engine."""
        return subprocess.run(["docker", *cmd], capture_output=True, text=True, check=True, timeout=120,
                              env={**os.environ, "DOCKER_HOST": self.docker_host}).stdout


def _read_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for line in ENV_FILE.read_text().splitlines():
        if line.startswith("export "):
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = shlex.split(value)[0] if value else ""
    return env


def script_env() -> dict[str, str]:
    """The host's environment for scripts/cluster/*.sh, naming this cluster."""
    host_env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    return {**host_env, "PREFIX": PREFIX, "ENV_FILE": str(ENV_FILE)}


def _up() -> dict[str, str]:
    """Reuse a running cluster that mounts SHARED, else (re)make it."""
    host_env = script_env()
    if ENV_FILE.exists():
        env = _read_env()
        shared = env.get("FLOWER_BATCH_CLUSTER_SHARED", "").split()
        alive = subprocess.run(["docker", "info", "-f", "{{.Swarm.LocalNodeState}}"], capture_output=True,
                               text=True, env={**host_env, "DOCKER_HOST": env["DOCKER_HOST"]}, timeout=30)
        if alive.returncode == 0 and alive.stdout.strip() == "active" and str(SHARED) in shared:
            return env
        # up (or half up) without our folder: make it again with it
        subprocess.run([str(REPO / "scripts" / "cluster" / "down.sh")], check=True, timeout=300, env=host_env)
    SHARED.mkdir(parents=True, exist_ok=True)
    extra = os.environ.get("FLOWER_BATCH_CLUSTER_SHARED", "")
    subprocess.run([str(REPO / "scripts" / "cluster" / "up.sh")], check=True, timeout=900, cwd=REPO,
                   env={**host_env, "SHARED": f"{SHARED} {REPO / 'volumes'} {extra}".strip()})
    return _read_env()


@functools.cache
def cluster() -> Cluster:
    image_id = runtime_image()  # the current sources, built on the host engine
    env = _up()
    host_env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    manager_env = {**host_env, "DOCKER_HOST": env["DOCKER_HOST"]}
    has = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", image_id], capture_output=True,
                         text=True, env=manager_env)
    if has.returncode != 0:  # load it into the manager (only the layers it lacks are written)
        save = subprocess.Popen(["docker", "save", image_id], stdout=subprocess.PIPE, env=host_env)
        subprocess.run(["docker", "load"], stdin=save.stdout, check=True, env=manager_env,
                       capture_output=True, timeout=900)
        assert save.wait() == 0
    pushed = subprocess.run([str(FLOWER_BATCH), "image", "push", env["FLOWER_BATCH_REGISTRY"], "--image", image_id],
                            capture_output=True, text=True, env=manager_env, timeout=900)
    assert pushed.returncode == 0, pushed.stderr
    return Cluster(docker_host=env["DOCKER_HOST"], registry=env["FLOWER_BATCH_REGISTRY"], shared=SHARED,
                   image_id=image_id, reference=pushed.stdout.strip())


def fb_swarm(c: Cluster, *args: str | Path, home: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`flower-batch ARGS --home HOME` against the cluster's manager (DOCKER_HOST), backend swarm."""
    return subprocess.run([str(FLOWER_BATCH), *map(str, args), "--home", str(home)], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO, env=c.env())


def fb_swarm_start(c: Cluster, *args: str | Path, home: Path, log: Path, cwd: Path = REPO) -> subprocess.Popen[str]:
    from tests.batch_fixtures.rig import STARTED

    out = log.open("w")
    proc = subprocess.Popen([str(FLOWER_BATCH), *map(str, args), "--home", str(home)], stdout=out,
                            stderr=subprocess.STDOUT, text=True, cwd=cwd, env=c.env(), start_new_session=True)
    STARTED.append(proc)
    return proc
