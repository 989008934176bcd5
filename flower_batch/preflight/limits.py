"""--cpus / --memory (and jobs.toml's cpus / memory) against what Docker accepts and the host has.

Docker refuses memory below 6 MiB and more CPUs than its host has, but only once the
container is created: too late, the job's folder and record already exist. Checked here first.
"""

from __future__ import annotations

from flower_batch.backend.docker.engine import EngineFacts
from flower_batch.jobmodel.units import DOCKER_MIN_MEMORY, format_memory


def _size(n: int) -> str:
    for unit, factor in (("g", 1024**3), ("m", 1024**2), ("k", 1024)):
        if n >= factor:
            return f"{n / factor:.3g}{unit}"
    return f"{n}b"


def memory_problem(memory: int | None, facts: EngineFacts | None) -> str | None:
    """Why this memory limit cannot be used (None: it can). Without `facts`: Docker's minimum only."""
    if memory is None:
        return None
    minimum = facts.min_memory if facts else DOCKER_MIN_MEMORY
    if memory < minimum:
        return (
            f"{format_memory(memory)} is below Docker's minimum of {format_memory(minimum)}; give at least 6m"
        )
    return None


def memory_warning(memory: int | None, facts: EngineFacts | None) -> str | None:
    """A limit above the host's memory: Docker accepts it, but it never binds (a warning, not an error,
    so a jobs.toml written for a bigger machine still runs)."""
    if memory is not None and facts and facts.mem_total and memory > facts.mem_total:
        return (
            f"{format_memory(memory)} is more than the Docker host has ({_size(facts.mem_total)}), "
            "so it limits nothing there"
        )
    return None


def cpus_problem(cpus: float | None, facts: EngineFacts | None) -> str | None:
    """Why this CPU limit cannot be used (None: it can). Without `facts`: only that it is positive."""
    if cpus is None:
        return None
    if not cpus > 0:
        return f"{cpus:g} is not a positive number of CPUs; give e.g. 2 or 0.5"
    if facts and facts.ncpu and cpus > facts.ncpu:
        return f"{cpus:g} is more than the {facts.ncpu} CPU(s) the Docker host has; give at most {facts.ncpu}"
    return None
