"""Every error flower-batch raises on purpose, in one tree.

::

    FlowerBatchError            something a user can fix; the command line prints it as one line
    │                           (one line per problem) and exits 2, or the `exit_code` it carries:
    │                           3 for the infrastructure errors marked [3] (no verdict, as matrix)
    ├── BackendError            a container engine operation failed (nothing above
    │   │                       flower_batch/backend/ ever sees a `docker` exception)
    │   ├── DaemonUnavailable   [3] the engine does not answer (not running, DOCKER_HOST, permission)
    │   ├── ImageMissing        the image is not in the engine (nothing is ever pulled)
    │   ├── OutOfDisk           [3] the engine ran out of disk space
    │   ├── NotFound            a container, network or volume asked for does not exist
    │   │   └── ContainerNotFound
    │   ├── ContainerNotRunning a signal was sent to a container that is not running
    │   ├── NameConflict        a container, network or volume of that name exists
    │   ├── NodeLost            [3] (swarm) the node running a task went down before it ended
    │   ├── SharedStorageMissing (swarm) a mounted folder is not the same storage on every node
    │   └── ReservationUnmet    (swarm) no node could ever hold a task's cpus/memory reservation
    ├── BackendChoiceError      --backend / $FLOWER_BATCH_BACKEND / [batch] backend names none
    ├── ImageBuildError         `image build` failed (base, wheelhouse or a Dockerfile step)
    ├── NotARuntimeImage        an image not built by `flower-batch image build`
    ├── RegistryError           `image push`: the registry refused or cannot be reached
    ├── ImageDrift              a registry reference names other bytes than the pinned image
    ├── GatewayError            [3] the gateway sidecar did not start or stopped answering
    ├── HomeFull                [3] the home's disk is full (an ENOSPC write, said in one line)
    ├── GatewayModeError        the host side of a gateway mode cannot be set up
    ├── GatewayConfigError      the gateway process cannot start with its settings   also a ValueError
    ├── UpstreamError           proxy mode: no usable upstream credential, or a bad upstream URL  also a ValueError
    ├── RecordingMissing        replay: the job has no recording             also a FileNotFoundError
    ├── RecordingFormatError    replay: a recording of another format, or of a newer flower-batch  also a ValueError
    ├── MatrixFileError         a jobs.toml is invalid; `errors` holds every FieldError  also a ValueError
    │   └── MatrixTooLarge      more jobs than MAX_JOBS without --allow-large
    ├── TemplateError           a `${{ ... }}` reference in jobs.toml cannot be rendered  also a ValueError
    ├── RecordError             a record.json is unreadable or misses a field       also a ValueError
    ├── JobNotFound             a job reference names no job of this home
    ├── TargetNotFound          a workflow target (module:attr, file.py:attr) names no file
    ├── WorkspaceUnusable       a job's workspace cannot be copied (too big, too deep, a file that
    │                           cannot be read): the job's input, never retried as infrastructure
    ├── PreflightFailed         problems found before anything ran; `lines`, one per problem
    ├── SideError               `compare`: a side is no batch, results.json or baseline file
    ├── ReproError              `repro`: the job cannot be reproduced (no record, no image, ...)
    └── RewardUnreadable        a verifier's reward.txt / reward.json is missing, too big, or not
                                a finite number: the job is `error` with this reason

    FieldError                  not an exception: one problem of a jobs.toml (file, line, field,
                                message), as MatrixFileError lists them

The "also a ValueError" leaves were plain ValueErrors before the tree existed: `except ValueError`
keeps working. Internal signals that never reach a user stay private to their module
(commands.common.Interrupted, view.server.BadRequest, transcripts.sessions.SessionsUnreadable).
An OSError that says the disk is full (`no_space`) is said as a HomeFull, in one line, where the
commands end (cli.OneLineErrors, commands.common.run_async). Anything else that escapes a
command (TypeError, another OSError, a `docker` exception outside backend/) is a bug or an unforeseen failure, and surfaces with its traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flower.full_disk import is_full


def escape_controls(text: str) -> str:
    """`text` with every unprintable character (a newline, a tab, a control character) shown
    escaped as Python writes it (a newline as \\n), the rest kept as it is: a value or key quoted in
    a problem stays on one line and still says what it holds.

    Not `flower.exitinfo.one_line`, which folds whitespace into spaces: here a newline in a jobs.toml
    key is part of what the person must see to fix it."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class FlowerBatchError(Exception):
    """Base of every error flower-batch reports to a user."""

    exit_code = 2  # what the command line exits with after printing the message


class _Infrastructure:
    """Mixed into the errors that are no verdict and no usage error (the engine, its disk, a
    node, the gateway): every command exits 3 on them, as `matrix` does on a job that ended in
    an infrastructure error (jobmodel/classes.py EXIT_INFRASTRUCTURE)."""

    exit_code = 3


class BackendError(FlowerBatchError):
    """A container engine operation failed."""


class DaemonUnavailable(_Infrastructure, BackendError):
    """The container engine does not answer (not running, wrong DOCKER_HOST, no permission)."""


class ImageMissing(BackendError):
    """The requested image is not present in the engine (and nothing is ever pulled)."""


class OutOfDisk(_Infrastructure, BackendError):
    """The engine ran out of disk space."""


class HomeFull(_Infrastructure, FlowerBatchError):
    """The home's filesystem has no space left: what could not be written is named, the previous
    complete file kept (flower.fileio.write_atomic), and the command ends with this one line."""


def no_space(exc: BaseException) -> bool:
    """An OSError that says the filesystem is full (ENOSPC, or EDQUOT: a quota's full)."""
    return isinstance(exc, OSError) and is_full(exc)


def home_full(exc: OSError) -> HomeFull:
    """The one line for a write that found the disk full."""
    where = f" writing {exc.filename}" if exc.filename else ""
    return HomeFull(
        f"no space left on the disk{where}: nothing was lost (every record and report keeps its "
        "last complete version); free space, then run the same command again"
    )


class ImageUnsupported(FlowerBatchError):
    """flower cannot run in a task's image: another architecture, no /bin/sh, no glibc
    (running/bundle.py's probe says which)."""


class NotFound(BackendError):
    """A container, network or volume that was asked for does not exist."""


class ContainerNotFound(NotFound):
    """The container does not exist (already removed, or never created)."""


class ContainerNotRunning(BackendError):
    """A signal was sent to a container that is not running."""


class NameConflict(BackendError):
    """A container, network or volume with that name already exists."""


class NodeLost(_Infrastructure, BackendError):
    """The node running a task went down before the task ended."""


class SharedStorageMissing(BackendError):
    """A folder a task mounts is not the same storage on every node."""


class ReservationUnmet(BackendError):
    """No node of the cluster could ever hold a task's cpus/memory reservation."""


class BackendChoiceError(FlowerBatchError):
    """The backend asked for (flag, environment or jobs.toml) is not one flower-batch has."""


class ImageBuildError(FlowerBatchError):
    """Building the runtime image (base, wheelhouse or Dockerfile step) failed."""


class NotARuntimeImage(FlowerBatchError):
    """An image exists but was not built by `flower-batch image build` (no version labels)."""


class RegistryError(FlowerBatchError):
    """Pushing the runtime image to a registry failed."""


class ImageDrift(FlowerBatchError):
    """A reference that should name the pinned bytes names others."""


class GatewayError(_Infrastructure, FlowerBatchError):
    """The gateway sidecar did not start, or stopped answering."""


class GatewayModeError(FlowerBatchError):
    """The host side of a gateway mode cannot be set up (missing key, scenario, recording)."""


class GatewayConfigError(FlowerBatchError, ValueError):
    """The gateway cannot start with these settings (one line saying which and why)."""


class UpstreamError(FlowerBatchError, ValueError):
    """Proxy mode's upstream cannot be used: no usable credential (on the host or in the gateway
    container), or an upstream URL that cannot be one (one line)."""


class RecordingMissing(FlowerBatchError, FileNotFoundError):
    """A job to replay has no recording (it ran before recordings existed, or it is no job folder)."""


class RecordingFormatError(FlowerBatchError, ValueError):
    """A recording to replay is of another format, or written by a newer flower-batch."""


@dataclass(frozen=True)
class FieldError:
    """One problem in a jobs.toml, printed as `file:line: field: message`."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        line = f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        return escape_controls(line)


class MatrixFileError(FlowerBatchError, ValueError):
    """A jobs.toml is invalid; `errors` holds every problem found, one line each."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


class MatrixTooLarge(MatrixFileError):
    """More jobs than MAX_JOBS without an explicit flag (one line)."""


class HarborTaskError(FlowerBatchError, ValueError):
    """A Harbor task folder flower-batch cannot read or does not honour yet: one line naming
    the folder's file and the fix (flower_batch/harbor/)."""


class TemplateError(FlowerBatchError, ValueError):
    """A reference that cannot be rendered; the message says why and how to fix it."""

    def __init__(self, message: str, ref: str) -> None:
        super().__init__(message)
        self.ref = ref


class BudgetError(FlowerBatchError, ValueError):
    """A budget that cannot be given: a cap already spent, or no cap left to continue under."""


class RecordError(FlowerBatchError, ValueError):
    """A record.json that is missing a field, has a wrong type, or is not JSON."""


class JobNotFound(FlowerBatchError):
    """A job reference (id or batch/job) names no job of this home."""


class TargetNotFound(FlowerBatchError):
    """A workflow target names no file or module that exists."""


class WorkspaceUnusable(FlowerBatchError):
    pass


class PreflightFailed(FlowerBatchError):
    """Problems found before anything ran; `lines` holds one line per problem."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = list(lines)
        super().__init__("\n".join(self.lines))


class SideError(FlowerBatchError):
    """A side of `compare` (batch, results.json or baseline) that cannot be read."""


class ReproError(FlowerBatchError):
    """A job that cannot be reproduced (its record, image or inputs are missing or changed)."""


class RewardUnreadable(FlowerBatchError):
    """What a task's hidden tests wrote as their reward cannot be taken (running/rewards.py)."""


class NotRegular(OSError):
    """A job's file that is not read (untrusted_files.py): a symlink on the way, or not a regular file.
    An OSError, not a FlowerBatchError: its readers treat it as a file they could not read."""

    def __init__(self, rel: str, why: str, shown: str) -> None:
        super().__init__(f"{shown}: {why}, not read")  # shown: the name as one printable line
        self.rel = rel
        self.why = why
