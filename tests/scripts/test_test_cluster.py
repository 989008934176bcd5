"""The swarm tests' cluster stays up under them, and when it does go, the failure says why.

In a full run the 3-node test cluster once went away mid-session: the fixture trusted a
checkout's images/.cache/cluster.env (stale, or hard-linked between worktrees) and took the
machine's one same-named cluster down and made it again whenever that file looked wrong, so any
second session, a `make cluster-up` with another SHARED or a CI clone's exit trap removed the
cluster a running session was using. Now a session holds the cluster's lock shared while it
lives; down.sh and any remake need it exclusive; the fixture reads the node containers, never the
file; and a cluster that went away is reported with who took it down.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.batch_fixtures.rig import REPO
from tests.batch_fixtures.swarm import ENV_FILE, PREFIX, Cluster, cluster, script_env
from tests.batch_fixtures.swarm_health import Snapshot, changes_log, gone
from tests.batch_fixtures.swarm_lock import ClusterLock, bring_up_path, lock_path

DOWN = REPO / "scripts" / "cluster" / "down.sh"


@pytest.fixture
def prefix() -> Iterator[str]:
    """A prefix no cluster has: its lock and log files are this test's alone."""
    name = f"fbunit{uuid.uuid4().hex[:8]}"
    yield name
    for path in (lock_path(name), changes_log(name)):
        path.unlink(missing_ok=True)


# -- without a cluster: the lock, down.sh's refusal, the words of a failure ---------------------
def test_down_sh_refuses_while_a_session_holds_the_cluster(prefix: str) -> None:
    session = ClusterLock(prefix)
    session.shared(timeout=5)
    try:
        refused = subprocess.run(
            [str(DOWN)], capture_output=True, text=True, timeout=60, env={**os.environ, "PREFIX": prefix}
        )
        assert refused.returncode == 3, refused.stderr
        assert f"cluster: {prefix} is in use by a test session" in refused.stderr
        assert "refused, in use" in changes_log(prefix).read_text()
        with pytest.raises(AssertionError, match="test sessions using the cluster to end"):
            ClusterLock(prefix).exclusive(timeout=1)  # a remake waits for the session too
        second = ClusterLock(prefix)
        second.shared(timeout=1)  # while another session shares it freely
        second.release()
    finally:
        session.release()
    remake = ClusterLock(prefix)
    remake.exclusive(timeout=1)  # nobody uses it any more
    remake.release()


def test_a_background_bring_up_holds_the_bring_up_lock_until_it_exits(prefix: str) -> None:
    """The session's background bring-up (swarm.start_in_background) takes the lock, hands it to
    its child and lets go of it itself: the swarm tests' `cluster()` waits for the child, not for
    the process that started it, and a second start does not start a second bring-up."""
    path = bring_up_path(prefix)
    starter = ClusterLock(prefix, path)
    assert starter.exclusive_now()
    child = subprocess.Popen(["sleep", "60"], pass_fds=(starter.fileno(),))
    try:
        starter.hand_over()
        assert not ClusterLock(prefix, path).exclusive_now()  # a second start: already under way
        with pytest.raises(AssertionError, match="waited 1s"):
            ClusterLock(prefix, path).exclusive(timeout=1)  # the tests wait for the child
    finally:
        child.kill()
        child.wait()
    after = ClusterLock(prefix, path)
    after.exclusive(timeout=5)  # the child is gone: its lock with it
    after.release()
    path.unlink()


# -- the scripts against a stand-in `docker` that answers as the host engine would ---------------
FAKE_DOCKER = r"""#!/bin/sh
# A stand-in docker CLI: the node containers exist only on the host engine (no DOCKER_HOST).
echo "${DOCKER_HOST:-host}|$*" >> "$CALLS"
case "$*" in
  "ps -aq --filter label="*) [ -z "${DOCKER_HOST:-}" ] && [ -n "$NODES" ] && echo c1 ;;
  "info -f {{.Name}}") [ -n "${DOCKER_HOST:-}" ] && echo "$PREFIX-manager" ;;
  "inspect -f {{.Name}} c1") echo "/$PREFIX-manager" ;;
  "inspect -f {{.State.Running}} "*) echo true ;;
  "inspect -f {{range .Mounts}}{{.Source}} {{end}} "*) echo "$MOUNTS" ;;
  "network ls "*) ;;
  "image inspect "*) ;;
  "network inspect "*) ;;
  *) ;;
esac
exit 0
"""


def fake_docker(tmp_path: Path, prefix: str, **env: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    (tmp_path / "cluster.env").write_text(
        "export DOCKER_HOST=tcp://10.9.9.9:2375\nexport FLOWER_BATCH_REGISTRY=x:5000\n"
        "export FLOWER_BATCH_CLUSTER_ENGINE=\n"
    )
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CALLS": str(tmp_path / "calls"),
        "PREFIX": prefix,
        "ENV_FILE": str(tmp_path / "cluster.env"),
        "NODES": "1",
        "MOUNTS": "",
        **env,
    }


def test_cluster_down_after_sourcing_cluster_env_removes_the_nodes_from_their_engine(
    tmp_path: Path, prefix: str
) -> None:
    env = fake_docker(tmp_path, prefix, DOCKER_HOST="tcp://10.9.9.9:2375")  # `. cluster.env`
    done = subprocess.run([str(DOWN)], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert f"cluster: removed {prefix}-manager" in done.stderr and "cluster: down" in done.stderr
    assert "host|rm -f c1" in (tmp_path / "calls").read_text().splitlines()  # on the host engine
    assert not (tmp_path / "cluster.env").exists()


def test_cluster_down_with_no_node_there_does_not_say_down(tmp_path: Path, prefix: str) -> None:
    env = fake_docker(tmp_path, prefix, NODES="")
    env.pop("DOCKER_HOST", None)
    done = subprocess.run([str(DOWN)], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert f"cluster: no node of {prefix} on the engine at the local socket" in done.stderr
    assert "cluster: down" not in done.stderr


def test_cluster_up_refuses_a_cluster_made_with_another_checkouts_folders(
    tmp_path: Path, prefix: str
) -> None:
    env = fake_docker(
        tmp_path, prefix, SHARED=str(tmp_path / "mine"), MOUNTS=f"/elsewhere/volumes {tmp_path}/x"
    )
    env.pop("DOCKER_HOST", None)
    done = subprocess.run(
        [str(REPO / "scripts" / "cluster" / "up.sh")], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 1
    assert f"cluster: {prefix}-manager was made with other shared folders" in done.stderr
    assert "rm -f" not in (tmp_path / "calls").read_text()  # nothing of it was removed


def test_a_cluster_made_again_under_a_session_names_who_did_it(prefix: str, monkeypatch) -> None:
    changes_log(prefix).write_text(
        "2026-12-01T10:40:02Z down.sh by pid 4242 (python -m pytest) in /tmp/ci-clone: taking x down\n"
        "2026-12-01T10:40:09Z up.sh by pid 4242 (python -m pytest) in /tmp/ci-clone: made x-manager\n"
    )
    now = {
        f"{prefix}-manager": {"Id": "new", "State": {"Running": True}},
        f"{prefix}-registry": {"Id": "reg", "State": {"Running": True}},
    }
    monkeypatch.setattr("tests.batch_fixtures.swarm_health.containers", lambda names: now)
    why = gone(Snapshot(prefix, "old", "reg", "tcp://172.26.0.3:2375"))
    assert why is not None and why.startswith(f"{prefix}-manager was removed and made again")
    assert "down.sh by pid 4242 (python -m pytest) in /tmp/ci-clone" in why


def test_a_node_that_stopped_says_when_and_whether_the_oom_killer_did_it(prefix: str, monkeypatch) -> None:
    running = {"Running": True}
    now = {
        f"{prefix}-manager": {"Id": "m", "State": running},
        f"{prefix}-registry": {"Id": "r", "State": running},
        f"{prefix}-worker1": {
            "Id": "w1",
            "State": {
                "Running": False,
                "OOMKilled": True,
                "ExitCode": 137,
                "FinishedAt": "2026-12-01T10:41:00.123Z",
            },
        },
        f"{prefix}-worker2": {"Id": "w2", "State": running},
    }
    monkeypatch.setattr("tests.batch_fixtures.swarm_health.containers", lambda names: now)
    why = gone(Snapshot(prefix, "m", "r", "tcp://172.26.0.3:2375"))
    assert why is not None and why.startswith(f"{prefix}-worker1 stopped at 2026-12-01T10:41:00 (OOM-killed)")
    assert "no scripts/cluster run is logged" in why


# -- on the live cluster ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def swarm() -> Cluster:
    return cluster()


def second_session(**env: str) -> subprocess.CompletedProcess[str]:
    """Another test process bringing the cluster up, as a second checkout's pytest would."""
    code = "from tests.batch_fixtures.swarm import _up; print(_up().manager_id)"
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={**os.environ, **env},
    )


@pytest.mark.swarm
def test_make_cluster_down_is_refused_while_tests_use_the_cluster(swarm: Cluster) -> None:
    refused = subprocess.run([str(DOWN)], capture_output=True, text=True, timeout=60, env=script_env())
    assert refused.returncode == 3 and "in use by a test session" in refused.stderr, refused.stderr
    assert gone(swarm.snap) is None


@pytest.mark.swarm
def test_a_second_session_uses_the_live_cluster_whatever_its_env_file_says(swarm: Cluster) -> None:
    kept = ENV_FILE.read_bytes() if ENV_FILE.exists() else None
    # what made the old fixture take the cluster down: a file naming a dead manager, no test folder
    ENV_FILE.write_text(
        "export DOCKER_HOST=tcp://192.0.2.1:2375\nexport FLOWER_BATCH_REGISTRY=x:5000\n"
        'export FLOWER_BATCH_CLUSTER_SHARED="/nowhere"\n'
    )
    try:
        other = second_session()
    finally:
        if kept is None:
            ENV_FILE.unlink()
        else:
            ENV_FILE.write_bytes(kept)
    assert other.returncode == 0, other.stderr[-2000:]
    assert other.stdout.split()[-1] == swarm.snap.manager_id
    assert gone(swarm.snap) is None


@pytest.mark.swarm
def test_a_cluster_without_the_tests_folder_is_refused_in_one_line_not_remade(
    swarm: Cluster, tmp_path: Path
) -> None:
    other = second_session(FB_TEST_SWARM_SHARED=str(tmp_path / "elsewhere"), FB_TEST_SWARM_PREFIX=PREFIX)
    assert other.returncode != 0
    last = other.stderr.strip().splitlines()[-1]
    assert f"the test cluster {PREFIX} cannot serve the swarm tests" in last, other.stderr[-2000:]
    assert f"without {tmp_path / 'elsewhere'} shared into it" in last and "FB_TEST_SWARM_PREFIX" in last
    assert gone(swarm.snap) is None
