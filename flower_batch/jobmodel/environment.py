"""A job's environment: the image its task runs in, when it is not flower-batch's runtime image.

A task names either a ready image (`image = "my-toolchain:1"`) or a folder to build
(`build = "envs/node"`, a `BuildRecipe`). Before anything runs, each is resolved to a `TaskImage`,
pinned by its immutable id like the runtime image; flower is brought into it from the runtime
image (running/bundle.py; on a cluster layered onto it, running/layered.py). The record keeps the `TaskImage` in its spec, so `wake` and `repro`
run in the same image and `show`, `ls`, the report and the exports name it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .hashing import json_hash

Origin = Literal["image", "build"]


@dataclass(frozen=True)
class BuildRecipe:
    """A folder with a Dockerfile, built once per content (the folder's hash, the Dockerfile's
    name and the build args are its key: the same folder is never built twice)."""

    folder: Path
    """Absolute host path of the build context."""
    folder_hash: str
    dockerfile: str = "Dockerfile"
    args: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return json_hash({"folder": self.folder_hash, "dockerfile": self.dockerfile, "args": dict(self.args)})

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "folder_hash": self.folder_hash,
            "dockerfile": self.dockerfile,
            "args": dict(self.args),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BuildRecipe:
        return cls(
            folder=Path(data["folder"]),
            folder_hash=str(data["folder_hash"]),
            dockerfile=str(data.get("dockerfile") or "Dockerfile"),
            args={str(k): str(v) for k, v in (data.get("args") or {}).items()},
        )


@dataclass(frozen=True)
class TaskImage:
    """The image a job's task runs in, resolved and pinned: its id and where it came from."""

    id: str
    """Immutable content id ("sha256:..."): what the job's container runs."""
    origin: Origin
    ref: str
    """As the user named it: the image's tag or id, or the build folder's path."""
    layered: str | None = None
    """On a cluster: the repo digest the job ran, this image with the runtime layered onto it
    (running/layered.py); None on one machine, where the runtime is a volume. Not an input."""

    @property
    def short(self) -> str:
        return self.id[:19]

    def describe(self) -> str:
        """For people: `debian:13 (sha256:0123…)`, `build envs/node (sha256:…)`."""
        where = f"build {self.ref}" if self.origin == "build" else self.ref
        return where if where == self.id else f"{where} ({self.short})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "origin": self.origin,
            "ref": self.ref,
            **({"layered": self.layered} if self.layered else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskImage:
        origin = data.get("origin")
        if origin not in ("image", "build"):
            raise ValueError(f"task_image.origin: expected image or build, got {origin!r}")
        layered = data.get("layered")
        return cls(
            id=str(data["id"]),
            origin=origin,
            ref=str(data.get("ref") or data["id"]),
            layered=str(layered) if layered else None,
        )
