"""Whether any node of a swarm could ever hold a task's reservation (pure functions over the
manager's node list), so a job no node can meet gets a one-line refusal instead of a task that
stays "pending" forever ("no suitable node (insufficient resources on 3 nodes)").

A busy cluster is no refusal: a node that is big enough but full now frees up as jobs end, and
a node that is down or drained counts too (it may come back; Swarm keeps the task pending).
Placement constraints narrow the candidates the way Swarm matches them (`==`/`!=` on
node.id, node.hostname, node.role, node.labels.*); any other attribute is not judged here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

GIB = 1024**3


def _attribute(node: Mapping[str, Any], key: str) -> str | None:
    """The node's value for a constraint's left side, or None when this module does not judge it."""
    spec = node.get("Spec") or {}
    if key == "node.id":
        return str(node.get("ID", ""))
    if key == "node.hostname":
        return str((node.get("Description") or {}).get("Hostname", ""))
    if key == "node.role":
        return str(spec.get("Role", ""))
    if key.startswith("node.labels."):
        return str((spec.get("Labels") or {}).get(key.removeprefix("node.labels."), ""))
    return None


def matches(node: Mapping[str, Any], constraints: Sequence[str]) -> bool:
    for constraint in constraints:
        op = "!=" if "!=" in constraint else "=="
        key, _, want = (part.strip() for part in constraint.partition(op))
        have = _attribute(node, key)
        if have is None:
            continue
        if (have == want) != (op == "=="):
            return False
    return True


def capacity(node: Mapping[str, Any]) -> tuple[int, int]:
    """(nano CPUs, memory bytes) the node offers Swarm."""
    res = (node.get("Description") or {}).get("Resources") or {}
    return int(res.get("NanoCPUs") or 0), int(res.get("MemoryBytes") or 0)


def unmet_reservation(
    nodes: Sequence[Mapping[str, Any]], nano_cpus: int | None, memory: int | None, constraints: Sequence[str]
) -> str | None:
    """Why no node could ever hold the reservation, or None when one could."""
    if not nano_cpus and not memory:
        return None
    candidates = [n for n in nodes if matches(n, constraints)]
    if any(capacity(n)[0] >= (nano_cpus or 0) and capacity(n)[1] >= (memory or 0) for n in candidates):
        return None
    want = " and ".join(
        part
        for part in (
            f"{nano_cpus / 1e9:g} CPUs" if nano_cpus else "",
            f"{memory / GIB:.1f} GiB" if memory else "",
        )
        if part
    )
    if not candidates:
        where = "no node matches its placement" if constraints else "the swarm has no node"
        return f"it reserves {want} but {where}"
    biggest = max(candidates, key=capacity)
    cpus, mem = capacity(biggest)
    return (
        f"it reserves {want} but no node has that much (the largest, "
        f"{(biggest.get('Description') or {}).get('Hostname', '?')}, has {cpus / 1e9:g} CPUs and "
        f"{mem / GIB:.1f} GiB): lower `cpus`/`memory` in jobs.toml or add a bigger node"
    )
