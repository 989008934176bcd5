"""What the Docker engine accepts and what its host has: the facts pre-flight checks limits against."""

from __future__ import annotations

from dataclasses import dataclass

from flower_batch.backend.docker.connection import Connection, translate

__all__ = ["EngineFacts", "engine_facts"]


@dataclass(frozen=True)
class EngineFacts:
    ncpu: int
    """CPUs the engine's host has (`docker info` NCPU): --cpus above it is refused by Docker."""
    mem_total: int
    """Bytes of memory the engine's host has (`docker info` MemTotal)."""


def engine_facts(base_url: str | None = None) -> EngineFacts:
    """One `docker info` call. Raises DaemonUnavailable / BackendError (one line)."""
    conn = Connection(base_url, timeout=30)
    try:
        info = conn.api().info()
    except Exception as exc:  # noqa: BLE001 - translated to our one-line errors
        raise translate(exc, "engine", "info", address=conn.address) from None
    finally:
        conn.close()
    return EngineFacts(ncpu=int(info.get("NCPU") or 0), mem_total=int(info.get("MemTotal") or 0))
