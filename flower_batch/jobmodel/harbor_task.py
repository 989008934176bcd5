"""A task that came from a Harbor task folder (`[tasksets.NAME] harbor = ...` in jobs.toml).

The folder's instruction.md is the job's prompt, its environment the job's task image, its
`tests/` the job's `Verifier` (grading.py); what the job needs to run lives in the JobSpec's own
fields. This keeps what the record and the report show about where the task came from: the folder,
its content digest (which enters the job's inputs hash), task.toml's metadata, whether an oracle
solution exists, and how its network policy was honoured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class HarborTask:
    folder: Path
    """Absolute host path of the task folder."""
    digest: str
    """sha256 of the folder's content (every file, tests and solution included)."""
    name: str
    schema_version: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """task.toml's [task] description and [metadata] (difficulty, category, tags...), as read."""
    has_solution: bool = False
    """solution/solve.sh exists: `matrix --oracle` can run it."""
    network_policy: str = "no-network"
    """As task.toml asks ("public", "no-network", "allowlist"), shown beside how it ran."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "digest": self.digest,
            "name": self.name,
            "schema_version": self.schema_version,
            "metadata": dict(self.metadata),
            "has_solution": self.has_solution,
            "network_policy": self.network_policy,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HarborTask:
        return cls(
            folder=Path(data["folder"]),
            digest=str(data["digest"]),
            name=str(data["name"]),
            schema_version=data.get("schema_version"),
            metadata=dict(data.get("metadata") or {}),
            has_solution=data.get("has_solution") is True,
            network_policy=str(data.get("network_policy") or "no-network"),
        )
