"""An orchestrator's lease: one `flower-batch` process that owns containers while it runs.

("Lease" is the orchestrator's word; a "session" is always an agent's conversation, as in
transcripts/sessions.py. On disk the old name stays: the `<home>/.sessions/` folder, the
`org.flower-batch.session` label and the record's `session` field, so what an older version
made is still found.)

Each lease holds a file lock `<home>/.sessions/<id>.lock` for as long as its process lives.
Everything it creates carries its id as a label, so `gc` can tell leaked resources (their
lease's lock is free: the process is gone) from ones a live orchestrator still uses.

A lease that ends normally removes its lock file; one whose process is SIGKILLed leaves it
behind. So a resource is *leaked* only when its lease's lock file is in this home and nobody
holds it. A lease with no lock file here belongs to another home (or a clean exit): it is left
alone, so `gc --home A` can never remove what an orchestrator of home B is using.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from flower_batch.backend.base import Backend
from flower_batch.errors import FlowerBatchError
from flower_batch.labels import BATCH, LEASE, MANAGED, ROLE


def leases_dir(home: Path) -> Path:
    return home / ".sessions"  # the folder's name on disk predates the word "lease"


class Lease:
    def __init__(self, home: Path) -> None:
        self.id = secrets.token_hex(4)
        self.path = leases_dir(home) / f"{self.id}.lock"
        self._lock = FileLock(str(self.path))

    def __enter__(self) -> Lease:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
        self.path.unlink(missing_ok=True)


def is_alive(home: Path, lease_id: str) -> bool:
    """True while the lease's process still holds its lock."""
    path = leases_dir(home) / f"{lease_id}.lock"
    if not path.exists():
        return False
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False


def is_leaked(home: Path, lease_id: str) -> bool:
    """True when the lease ran from this home and died without cleaning up (its lock file is
    still here, and free)."""
    if not lease_id or not (leases_dir(home) / f"{lease_id}.lock").exists():
        return False
    return not is_alive(home, lease_id)


@dataclass(frozen=True)
class Leak:
    kind: str  # container | network | volume | secret (engine secrets, on a cluster)
    id: str
    name: str
    role: str
    lease: str


async def find_leaks(backend: Backend, home: Path, batch: str | None = None) -> tuple[list[Leak], int]:
    """Our labelled resources whose lease died in this home (optionally of one batch), and
    how many others carry our labels but belong to leases this home does not know."""
    want = {MANAGED: "1", **({BATCH: batch} if batch else {})}
    found: list[Leak] = []
    foreign = 0

    def sort(kind: str, id_: str, name: str, labels: dict[str, str]) -> None:
        nonlocal foreign
        lease = labels.get(LEASE, "")
        if is_leaked(home, lease):
            found.append(Leak(kind, id_, name, labels.get(ROLE, ""), lease))
        elif not is_alive(home, lease):
            foreign += 1

    for c in await backend.list_by_label(want):
        sort("container", c.id, c.name, c.labels)
    for n in await backend.list_networks_by_label(want):
        sort("network", n.id, n.name, n.labels)
    for v in await backend.list_volumes_by_label(want):
        sort("volume", v.name, v.name, v.labels)
    for s in await backend.list_secrets_by_label(want):
        sort("secret", s.id, s.name, s.labels)
    return found, foreign


def dead_leases(home: Path) -> list[str]:
    """The leases of this home whose orchestrator died: lock file here, nobody holding it."""
    folder = leases_dir(home)
    ids = sorted(p.stem for p in folder.glob("*.lock")) if folder.is_dir() else []
    return [lease for lease in ids if is_leaked(home, lease)]


async def on_the_nodes(backend: Backend, home: Path, remove: bool) -> tuple[list[Leak], list[str]]:
    """Containers of this home's dead leases that only a cluster node's own engine still lists
    (Backend.sweep_nodes), removed when `remove`; and the nodes that could not be looked on."""
    leases = dead_leases(home)
    found, away = await backend.sweep_nodes([{MANAGED: "1", LEASE: lease} for lease in leases], remove)
    leaks = [
        Leak("container", f.id, f"{f.node}:{f.name}", f.labels.get(ROLE, ""), f.labels.get(LEASE, ""))
        for f in found
    ]
    return leaks, away


async def remove_leaks(
    backend: Backend, home: Path, leaks: list[Leak], *, nodes: bool = False
) -> tuple[list[Leak], list[str]]:
    """Remove them (containers first: a network in use cannot go), then with `nodes` what the
    cluster's nodes still hold of dead leases (on_the_nodes: `gc` looks, a re-run's reap does
    not), then forget the leases that own nothing any more, unless a node could not be looked
    on. Returns on_the_nodes' answer."""
    order = {"container": 0, "secret": 1, "network": 2, "volume": 3}
    ordered = sorted(leaks, key=lambda x: order[x.kind])
    containers = [leak for leak in ordered if leak.kind == "container"]
    await _remove(backend, containers)
    looked = dead_leases(home) if nodes else []  # forgotten too once nothing of theirs is left
    swept, away = await on_the_nodes(backend, home, remove=True) if nodes else ([], [])
    await _remove(backend, [leak for leak in ordered if leak.kind != "container"])
    if not away:
        for lease in {leak.lease for leak in [*leaks, *swept]} | set(looked):
            if not await _still_owns(backend, lease):
                (leases_dir(home) / f"{lease}.lock").unlink(missing_ok=True)
    return swept, away


async def _remove(backend: Backend, leaks: list[Leak]) -> None:
    for leak in leaks:
        try:
            if leak.kind == "container":
                await backend.remove(leak.id, force=True)
            elif leak.kind == "network":
                await backend.remove_network(leak.id)
            elif leak.kind == "secret":
                await backend.remove_secret(leak.id)
            else:
                await backend.remove_volume(leak.id, force=True)
        except FlowerBatchError:
            pass  # already gone (another gc, or the engine removed it)


async def _still_owns(backend: Backend, lease: str) -> bool:
    """Whether anything with this lease's label is still there."""
    want = {MANAGED: "1", LEASE: lease}
    return bool(
        await backend.list_by_label(want)
        or await backend.list_networks_by_label(want)
        or await backend.list_volumes_by_label(want)
        or await backend.list_secrets_by_label(want)
    )
