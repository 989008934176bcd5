"""Container backends: the interface (`base`), `DockerBackend` (`docker_backend`) and `FakeBackend` (`fake`).

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
    "VolumeInfo",
]
