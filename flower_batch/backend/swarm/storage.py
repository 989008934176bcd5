"""Checking, from the nodes, that a folder is shared storage mounted at the same path everywhere.

A `global` probe service (restart "none") runs one task on every node jobs may use. Each task reads a marker the host
wrote into the folder and writes one back named after its node; the host then finds every node's
reply with the right token. A node without the path, or with a different filesystem at it,
refuses the batch in one line naming the path.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

PROBE_DIR = ".fb-storage-probe"


class Probe:
    """The marker files of one check of `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.token = secrets.token_hex(8)
        self.dir = root / PROBE_DIR / self.token

    def write(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "host").write_text(self.token + "\n")

    def command(self) -> list[str]:
        """What each node runs: read the host's marker, answer with the node's name."""
        d = str(self.dir)
        return [
            "sh",
            "-c",
            f'test "$(cat {d}/host)" = {self.token} && echo {self.token} > "{d}/node-$FB_NODE"',
        ]

    def answered(self, node: str) -> bool:
        try:
            return (self.dir / f"node-{node}").read_text().strip() == self.token
        except OSError:
            return False

    def clean(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        try:
            (self.root / PROBE_DIR).rmdir()
        except OSError:
            pass


def refusal(path: Path, node: str, why: str) -> str:
    return (
        f"{path} is not shared storage seen by node {node} at the same path ({why}): job folders "
        "must be on storage every node mounts there (NFS, CephFS) — use --home on such a mount"
    )
