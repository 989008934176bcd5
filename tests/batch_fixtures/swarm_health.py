"""Whether the test swarm is there, as the host engine sees it, and, when it went away under a test
session, why, in words a failing test can print.

Never a file that may be stale: a checkout's images/.cache/cluster.env is written by whichever
up.sh ran last in that checkout, so it can name a manager address or shared folders of a cluster
long gone (or, hard-linked between worktrees, another checkout's). The node containers themselves
are the truth. scripts/cluster/{up,down}.sh append a line per run to a log naming who ran them
(`changes_log`), so a cluster taken down under a session is reported with the command that did it.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WORKERS = 2


def changes_log(prefix: str) -> Path:
    return Path("/tmp") / f"flower-batch-cluster-{prefix}.log"  # up.sh/down.sh: the same path


def nodes(prefix: str) -> list[str]:
    return [f"{prefix}-manager", *(f"{prefix}-worker{i}" for i in range(1, WORKERS + 1))]


def host_docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`docker ARGS` on the host engine (the nodes are its containers), whatever DOCKER_HOST says."""
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    return subprocess.run(["docker", *args], capture_output=True, text=True, env=env, timeout=timeout)


def containers(names: list[str]) -> dict[str, dict[str, Any]]:
    """`docker inspect` of those of `names` that exist."""
    out = host_docker("inspect", *names)
    found = json.loads(out.stdout or "[]")
    return {c["Name"].lstrip("/"): c for c in found}


def manager_ip(prefix: str, manager: dict[str, Any]) -> str:
    return str(manager["NetworkSettings"]["Networks"][f"{prefix}-net"]["IPAddress"])


@dataclass(frozen=True)
class Problem:
    whole: bool
    """Every node runs and answers, but the cluster does not suit these tests (a folder missing):
    someone made it by hand, and it is not ours to remake."""
    text: str


def problem(prefix: str, shared: list[Path]) -> Problem | None:
    """What keeps the cluster from serving these tests, or None."""
    names = [f"{prefix}-registry", *nodes(prefix)]
    found = containers(names)
    for name in names:
        if name not in found:
            return Problem(False, f"{name} does not exist")
        if not found[name]["State"]["Running"]:
            return Problem(False, ended(prefix, name, found[name]))
    listed = host_docker(
        "exec", f"{prefix}-manager", "docker", "node", "ls", "--format", "{{.Hostname}} {{.Status}}"
    )
    if listed.returncode != 0:
        return Problem(False, f"the swarm manager does not answer: {' '.join(listed.stderr.split())[:300]}")
    ready = {line.split()[0] for line in listed.stdout.splitlines() if line.endswith(" Ready")}
    if not set(nodes(prefix)) <= ready:
        return Problem(
            False, f"not every node is a Ready swarm node: {' / '.join(listed.stdout.splitlines())}"
        )
    for name in nodes(prefix):
        mounted = {m["Destination"] for m in found[name]["Mounts"] if m["Type"] == "bind"}
        missing = [str(d) for d in shared if str(d) not in mounted]
        if missing:
            return Problem(
                True,
                f"{name} is up without {', '.join(missing)} shared into it (made by "
                "`make cluster-up` with another SHARED?)",
            )
    return None


@dataclass(frozen=True)
class Snapshot:
    """The cluster a session started with: a new manager is a new swarm at a new address."""

    prefix: str
    manager_id: str
    registry_id: str
    docker_host: str


def snapshot(prefix: str) -> Snapshot:
    found = containers([f"{prefix}-manager", f"{prefix}-registry"])
    manager = found[f"{prefix}-manager"]
    return Snapshot(
        prefix, manager["Id"], found[f"{prefix}-registry"]["Id"], f"tcp://{manager_ip(prefix, manager)}:2375"
    )


def gone(snap: Snapshot) -> str | None:
    """Why the cluster of `snap` is no longer there to use, or None while it is."""
    prefix = snap.prefix
    found = containers([f"{prefix}-registry", *nodes(prefix)])
    for name, was in ((f"{prefix}-manager", snap.manager_id), (f"{prefix}-registry", snap.registry_id)):
        now = found.get(name)
        if now is None:
            return f"{name} was removed{by_whom(prefix)}"
        if now["Id"] != was:
            return f"{name} was removed and made again{by_whom(prefix)}"
    for name in [f"{prefix}-registry", *nodes(prefix)]:
        if name not in found:
            return f"{name} was removed{by_whom(prefix)}"
        if not found[name]["State"]["Running"]:
            return ended(prefix, name, found[name])
    info = host_docker("exec", f"{prefix}-manager", "docker", "info", "-f", "{{.Swarm.LocalNodeState}}")
    if info.returncode != 0 or info.stdout.strip() != "active":
        return f"the manager's dockerd does not answer ({' '.join(info.stderr.split())[:200]}){dockerd_end(prefix)}"
    return None


def ended(prefix: str, name: str, container: dict[str, Any]) -> str:
    """A node container that stopped: when, how, and whether the kernel's OOM killer did it."""
    state = container["State"]
    how = "OOM-killed" if state.get("OOMKilled") else f"exit code {state.get('ExitCode')}"
    return f"{name} stopped at {state.get('FinishedAt', '?')[:19]} ({how}){by_whom(prefix)}"


def dockerd_end(prefix: str) -> str:
    """The last words of the manager's dockerd (started by up.sh with `docker exec -d`)."""
    tail = host_docker(
        "exec",
        f"{prefix}-manager",
        "sh",
        "-c",
        "pgrep -a dockerd || echo 'no dockerd process'; tail -3 /var/log/dockerd.log",
        timeout=30,
    )
    return "; in the node: " + " / ".join(tail.stdout.split("\n")).strip(" /")[:600]


def by_whom(prefix: str) -> str:
    """The last runs of scripts/cluster/up.sh and down.sh for this cluster, from their log."""
    try:
        lines = changes_log(prefix).read_text().splitlines()
    except OSError:
        return " (no scripts/cluster run is logged: something outside them, e.g. `docker rm`)"
    return f"; last cluster scripts run ({changes_log(prefix)}): " + " | ".join(lines[-3:])
