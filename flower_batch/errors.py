"""flower-batch's own error types.

Every error carries a single line a user can act on (what failed, and what to do about it);
the CLI prints `str(err)` and exits non-zero, never a traceback. Nothing above
`flower_batch/backend/` ever sees an exception type from the `docker` package.
"""

from __future__ import annotations


class FlowerBatchError(Exception):
    """Base of every error flower-batch reports to a user."""


class BackendError(FlowerBatchError):
    """A container engine operation failed."""


class DaemonUnavailable(BackendError):
    """The container engine does not answer (not running, wrong DOCKER_HOST, no permission)."""


class ImageMissing(BackendError):
    """The requested image is not present in the engine (and nothing is ever pulled)."""


class OutOfDisk(BackendError):
    """The engine ran out of disk space."""


class NotFound(BackendError):
    """A container, network or volume that was asked for does not exist."""


class ContainerNotFound(NotFound):
    """The container does not exist (already removed, or never created)."""


class ContainerNotRunning(BackendError):
    """A signal was sent to a container that is not running."""


class NameConflict(BackendError):
    """A container, network or volume with that name already exists."""


class ImageBuildError(FlowerBatchError):
    """Building the runtime image (base, wheelhouse or Dockerfile step) failed."""


class NotARuntimeImage(FlowerBatchError):
    """An image exists but was not built by `flower-batch image build` (no version labels)."""
