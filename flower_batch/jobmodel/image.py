"""The image a job runs on, as one value: pinned by its immutable id, with the versions inside it
(flower-batch, claude-agent-sdk, the CLI) that a record keeps. `run`, `matrix`, `wake` and `repro`
hand it down whole (running/plan.py -> the job's context -> its record and its gateway)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PinnedImage:
    id: str
    """Immutable content id ("sha256:..."): what a job pins; the same id on any engine or node."""
    versions: Mapping[str, str] = field(default_factory=dict)
    """{"flower_batch": ..., "sdk": ..., "cli": ...}: what `repro` compares to call it drift."""

    @property
    def short(self) -> str:
        """For people: "sha256:" and the first twelve hex digits."""
        return self.id[:19]
