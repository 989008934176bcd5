"""--cpus / --memory (and jobs.toml's cpus / memory) against what Docker accepts and the host has.

Docker refuses memory below 6 MiB and more CPUs than its host has, but only once the
container is created: too late, the job's folder and record already exist. Checked here first.
"""

from __future__ import annotations

from flower_batch.backend.docker.engine import EngineFacts
from flower_batch.jobmodel import fields
from flower_batch.jobmodel.units import DOCKER_MIN_MEMORY, format_memory


def _size(n: int) -> str:
    for unit, factor in (("g", 1024**3), ("m", 1024**2), ("k", 1024)):
        if n >= factor:
            return f"{n / factor:.3g}{unit}"
    return f"{n}b"


def memory_problem(memory: int | None, facts: EngineFacts | None) -> str | None:
    """Why this memory limit cannot be used (None: it can): Docker's minimum (jobmodel/fields.py)."""
    if memory is None:
        return None
    if floor := fields.memory_floor(memory):
        least = format_memory(DOCKER_MIN_MEMORY)
        return f"{format_memory(memory)} is {floor}; give at least {least}"
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
    checked = fields.cpus(cpus, lambda value: f"{value:g}")
    if isinstance(checked, fields.Problem):
        return checked.text
    if facts and facts.ncpu and cpus > facts.ncpu:
        return f"{cpus:g} is more than the {facts.ncpu} CPU(s) the Docker host has; give at most {facts.ncpu}"
    return None
