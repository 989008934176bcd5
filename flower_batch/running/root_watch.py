"""What a writable root writes, bounded where the engine cannot bound it (storage-opt size needs
overlay2 on xfs with pquota, or btrfs/zfs; fuse-overlayfs has none): the container's own layer
(Docker's SizeRw) looked at every WATCH_EVERY_S, and the container stopped once it is over."""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from flower_batch.backend.base import Backend
from flower_batch.errors import FlowerBatchError
from flower_batch.jobmodel.units import format_memory

WATCH_EVERY_S = 10.0
"""Each look costs the engine about a second (it sizes the image's whole root too, through
fuse-overlayfs: bench/writable_root.py), so a job may overshoot its bound by what it writes in
this long."""


@dataclass
class RootOver:
    """Set when the watchdog stopped the job: what it had written, and its bound."""

    written: int = 0
    limit: int = 0

    @property
    def reason(self) -> str:
        return (
            f"stopped: the job wrote {format_memory(self.written)} into its writable root, over its "
            f"bound of {format_memory(self.limit)} (its disk)"
        )


async def watch_root(backend: Backend, container: str, limit: int, over: RootOver) -> None:
    """Until cancelled: stop `container` once it wrote more than `limit` bytes, saying so in `over`."""
    while True:
        await anyio.sleep(WATCH_EVERY_S)
        try:
            written = await backend.written_bytes(container)
        except FlowerBatchError:
            continue  # the engine is busy: the next look
        if written is not None and written > limit:
            over.written, over.limit = written, limit
            try:
                await backend.stop(container, grace_s=2)
            except FlowerBatchError:
                pass
            return
