"""One validator per job field, shared by jobs.toml, the `run`/`wake` options and the environment.

Each takes a value as the person gave it (a TOML value, an option, an environment variable's
text) and returns the parsed value or a `Problem`: what is wrong with it, naming the value as
that place writes it (`show`: jobs.toml quotes strings as TOML does, the command line shows them
as typed). The caller frames the problem in its one line: jobs.toml `file:line: key.path:
<problem>`, the command line `--memory 1m: <problem>`.

`memory_floor` is the one place Docker's minimum memory limit is checked (by the `memory`
validator, by pre-flight for a recorded spec, and for the gateway's own limit).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .budget import BudgetChange
from .spec import MIN_DISK, MIN_PIDS, NETWORKS, PLACEMENT, ROOTS, RUN_AS, WORKDIR_FROM_IMAGE, reserved_workdir
from .units import DOCKER_MIN_MEMORY, format_memory, parse_duration, parse_memory

Show = Callable[[object], str]
"""A value as the place it was written shows it: `str` for an option, TOML quoting for jobs.toml."""


@dataclass(frozen=True)
class Problem:
    """Why a value is refused, and what to give instead: the text after the caller's framing."""

    text: str


def memory_floor(size: int) -> str | None:
    """Docker refuses a memory limit below 6 MiB: "below Docker's minimum of 6m", or None."""
    if size < DOCKER_MIN_MEMORY:
        return f"below Docker's minimum of {format_memory(DOCKER_MIN_MEMORY)}"
    return None


def duration(value: object, show: Show = str) -> float | Problem:
    """Seconds (above 0) from "10m", "1h30m", "90s" or a number of seconds."""
    seconds = parse_duration(value)
    if seconds is None:
        return Problem(f'expected a duration like "10m", "1h30m" or seconds, got {show(value)}')
    return seconds


def memory(value: object, show: Show = str) -> int | Problem:
    """Bytes from "512m", "2g", "1.5GiB" or a number of bytes, at least Docker's minimum."""
    size = parse_memory(value)
    if size is None:
        return Problem(f'expected a memory size like "512m" or "2g" (or bytes), got {show(value)}')
    if floor := memory_floor(size):
        least = show(format_memory(DOCKER_MIN_MEMORY))
        return Problem(f"{show(value)} is {floor}; give the job at least {least}")
    return size


def disk(value: object, show: Show = str) -> int | Problem:
    """Bytes the job may write, from "500m", "10g", "1.5GiB" or bytes, at least MIN_DISK."""
    size = parse_memory(value)
    if size is None:
        return Problem(f'expected a disk size like "500m" or "10g" (or bytes), got {show(value)}')
    if size < MIN_DISK:
        least = show(format_memory(MIN_DISK))
        return Problem(f"{show(value)} is too small for a job's own filesystem; give it at least {least}")
    return size


def cpus(value: object, show: Show = str) -> float | Problem:
    """A positive number of CPUs."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return Problem(f"expected a positive number of CPUs like 1 or 0.5, got {show(value)}")
    return float(value)


def pids(value: object, show: Show = str) -> int | Problem:
    """The processes and threads a job may hold: a whole number of at least MIN_PIDS."""
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_PIDS:
        return Problem(
            f"expected a whole number of processes of at least {MIN_PIDS}, like 4096, got {show(value)}"
        )
    return value


class _Choice(Protocol):
    def __call__(self, value: object, show: Show = str) -> str | Problem: ...


def _one_of(choices: tuple[str, ...], expected: str, doc: str) -> _Choice:
    """A validator of a field whose value is one of `choices`; `expected` says them as people read them."""

    def check(value: object, show: Show = str) -> str | Problem:
        if not isinstance(value, str) or value not in choices:
            return Problem(f"expected {expected}, got {show(value)}")
        return value

    check.__doc__ = doc
    return check


network = _one_of(
    NETWORKS,
    '"gateway" (the model only: the default) or "internet" (also a route out)',
    "One of NETWORKS.",
)


def budget_usd(value: object, show: Show = str) -> float | Problem:
    """A positive amount of US dollars."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        return Problem(f"expected a positive amount of US dollars like 0.50, got {show(value)}")
    return float(value)


def budget_cap(value: object, show: Show = str) -> BudgetChange | Problem:
    """A cap of US dollars ("0.50") or an amount to add to the current one ("+0.20")."""
    text = value.strip() if isinstance(value, str) else value
    added = isinstance(text, str) and text.startswith("+")
    if isinstance(text, str):
        try:
            text = float(text.removeprefix("+"))
        except ValueError:
            text = None
    amount = budget_usd(text)
    if isinstance(amount, Problem):
        return Problem(
            f"expected a positive amount of US dollars like 0.50, or +0.20 to add to the cap, got {show(value)}"
        )
    return BudgetChange(amount, added)


def persistent(value: object, show: Show = str) -> bool | Problem:
    """true: the job keeps its conversation (a budget pauses it; `wake` and `matrix` continue it)."""
    if not isinstance(value, bool):
        return Problem(f"expected true or false, got {show(value)}")
    return value


def workspace_limit(value: object, show: Show = str) -> int | Problem:
    """Bytes of workspace a job may copy, from "500m", "2g" or bytes; "none" (0): no size limit."""
    if value == "none":
        return 0
    size = parse_memory(value)
    if size is None:
        return Problem(f'expected a size like "500m" or "2g", or "none" for no size limit, got {show(value)}')
    return size


def exclude_pattern(value: object, show: Show = str) -> str | Problem:
    """One pattern left out of the workspace copy, as a line of .flowerbatchignore."""
    if not isinstance(value, str) or not value.strip() or "\n" in value or "\x00" in value:
        return Problem(f'expected a path pattern like "data/" or "*.bin", got {show(value)}')
    return value.strip()


def placement(value: object, show: Show = str) -> str | Problem:
    """One Swarm placement constraint (PLACEMENT), stripped."""
    if not isinstance(value, str) or not PLACEMENT.match(value.strip()):
        return Problem(
            f'expected a constraint like "node.labels.pool==big" or "node.role!=manager", got {show(value)}'
        )
    return value.strip()


root = _one_of(
    ROOTS,
    '"read-only" (the default) or "writable" (the job may change the image\'s files, its writes bounded)',
    'One of ROOTS: "read-only" (the default) or "writable" (the image\'s package managers work).',
)
user = _one_of(
    RUN_AS,
    '"sandbox" (an unprivileged uid: the default) or "root" (uid 0 with the few capabilities package '
    "managers need)",
    'One of RUN_AS: "sandbox" (the default) or "root" (uid 0 with a package manager\'s capabilities).',
)


def workdir(value: object, show: Show = str) -> str | Problem:
    """An absolute container path where the workspace is mounted and the agent works, or "image"
    (the task image's WORKDIR); never one of the paths flower or the system own."""
    if value == WORKDIR_FROM_IMAGE:
        return value
    text = value.strip() if isinstance(value, str) else None
    if not text or not text.startswith("/") or "\x00" in text or "\n" in text:
        return Problem(f'expected an absolute container path like "/app", or "image", got {show(value)}')
    parts = [p for p in text.split("/") if p]
    if any(p in (".", "..") for p in parts):
        return Problem(f'expected a plain absolute path (no "." or ".."), got {show(value)}')
    path = "/" + "/".join(parts)
    if why := reserved_workdir(path):
        return Problem(f'{show(value)} is reserved ({why}); pick a folder of its own, like "/app"')
    return path


def pass_reward(value: object, show: Show = str) -> float | Problem:
    """The reward at or above which a job with hidden tests passes: a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return Problem(
            f"expected a number like 1.0 or 0.5 (the reward a job needs to pass), got {show(value)}"
        )
    return float(value)
