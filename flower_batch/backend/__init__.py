"""Backends: the interface (`base`), `DockerBackend` (`docker_backend`), `SwarmBackend` (`swarm`), `FakeBackend` (`fake`).

Only this package imports `docker`.
"""

from flower_batch.backend.base import (
    Backend,
    ContainerInfo,
    ContainerSpec,
    ImageInfo,
    LabelFilter,
    Mount,
    NetworkInfo,
    SecretInfo,
    VolumeInfo,
)

__all__ = [
    "Backend",
    "ContainerInfo",
    "ContainerSpec",
    "ImageInfo",
    "LabelFilter",
    "Mount",
    "NetworkInfo",
    "SecretInfo",
    "VolumeInfo",
]
