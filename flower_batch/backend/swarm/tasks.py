"""Reading a Swarm service's one task as a container-like state (pure functions over API dicts).

A job and the gateway are `replicated` services of one replica; the newest task is the one that
counts (Swarm replaces a gateway task that died, and a job's resubmitted one). Also: whether
the image a node ran is the pinned build (`image_drift`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from flower_batch.backend.base import ContainerState

T = TypeVar("T", bound=Mapping[str, Any])

# Swarm task states (swarmkit api/types.proto) and what they mean as a container state.
_BEFORE_RUNNING = {"new", "allocated", "pending", "assigned", "accepted", "preparing", "ready", "starting"}
_ENDED = {"complete", "failed", "shutdown", "rejected", "orphaned", "remove"}
# Taken by a node but not reported running yet: the process may already run there (the manager
# hears of "running" from the node's agent, seconds later under load).
_ON_ITS_NODE = {"assigned", "accepted", "preparing", "ready", "starting"}


def newest_task(tasks: Sequence[T]) -> T | None:
    """The task that counts: the most recently created one."""
    return max(
        tasks, key=lambda t: (t.get("CreatedAt") or "", t.get("Version", {}).get("Index", 0)), default=None
    )


def task_state(task: Mapping[str, Any] | None) -> tuple[ContainerState, int | None]:
    """(state, exit code) of a task, or ("created", None) for a service not started yet."""
    if task is None:
        return "created", None
    status = task.get("Status") or {}
    state = status.get("State", "new")
    if state in _BEFORE_RUNNING:
        return "created", None
    if state == "running":
        return "running", None
    if state == "rejected":  # never a normal end, even when a container had started
        return "dead", None
    exit_code = (status.get("ContainerStatus") or {}).get("ExitCode")
    if state in _ENDED and exit_code is not None and (status.get("ContainerStatus") or {}).get("ContainerID"):
        return "exited", int(exit_code)
    return "dead", None  # ended without ever running a container (rejected: no image, bad mount)


def task_error(task: Mapping[str, Any] | None) -> str:
    """Swarm's own words for why a task did not run (its Status.Err), or ""."""
    if task is None:
        return ""
    status = task.get("Status") or {}
    return " ".join(str(status.get("Err") or status.get("Message") or "").split())


def ever_ran(task: Mapping[str, Any] | None) -> bool:
    """Whether the task got as far as a container."""
    return bool(task and ((task.get("Status") or {}).get("ContainerStatus") or {}).get("ContainerID"))


def image_drift(what: str, host: str, expected: str, reported: str | None) -> str | None:
    """Why the node ran other bytes than the pinned image for `what` (a task), or None when it ran
    them. `reported`: the build key its task wrote (task_signals), None when it wrote none."""
    if not expected or reported == expected:
        return None
    found = f"image build {reported[:12]}" if reported else "an image that reports no build"
    return (
        f"node {host} ran other bytes for {what}: {found}, not the pinned {expected[:12]} — remove the "
        f"runtime image on {host} so it pulls the pinned one, then run the job again"
    )


def on_its_node(task: Mapping[str, Any] | None) -> bool:
    """Whether a task the manager does not yet call running is on its node, maybe running."""
    return task is not None and str((task.get("Status") or {}).get("State")) in _ON_ITS_NODE
