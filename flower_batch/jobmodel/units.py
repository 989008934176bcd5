"""Durations ("10m", "1h30m", 90) and memory sizes ("512m", "2g", "1.5GiB")."""

from __future__ import annotations

import re

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)", re.IGNORECASE)
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_MEMORY_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


# Docker refuses a memory limit below 6 MiB ("Minimum memory limit allowed is 6MB").
DOCKER_MIN_MEMORY = 6 * 1024 * 1024


def parse_duration(value: object) -> float | None:
    """Seconds from a number or a string like "90s", "10m", "1h30m", "1.5h"; None if not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value > 0 else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        seconds = float(text)
        return seconds if seconds > 0 else None
    parts = _DURATION_PART.findall(text)
    if not parts or _DURATION_PART.sub("", text).strip():
        return None
    seconds = sum(float(n) * _DURATION_UNITS[u.lower()] for n, u in parts)
    return seconds if seconds > 0 else None


def parse_memory(value: object) -> int | None:
    """Bytes from an integer or a string like "512m", "2g", "1.5GiB" (binary units, as Docker)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if not isinstance(value, str):
        return None
    match = _MEMORY.match(value)
    if not match:
        return None
    amount = float(match.group(1)) * _MEMORY_UNITS[match.group(2).lower()]
    return int(amount) if amount >= 1 else None


def format_duration(seconds: float | None) -> str:
    """Short human form: 0.4s, 12s, 3m05s, 1h02m."""
    if seconds is None:
        return "?"
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def format_memory(size: int | None) -> str:
    if size is None:
        return "unlimited"
    for unit, factor in (("g", 1024**3), ("m", 1024**2), ("k", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}b"
