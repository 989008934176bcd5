"""Reading a Swarm service's log as it streams (pure helpers): lines split from chunks, and the
timestamp Swarm puts before each line (`timestamps=True`), which is how a followed log asks only
for what is new (the API's `since` is to the second; the timestamp tells the lines of that second
already seen from the new ones)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

LOG_BATCH = 256  # chunks read per trip to the worker thread


@dataclass(frozen=True, order=True)
class LogStamp:
    """An RFC 3339 timestamp as Swarm writes it (nanoseconds, trailing zeros trimmed), ordered."""

    seconds: int  # since the epoch
    nanos: int


def split_stamp(raw: str) -> tuple[LogStamp | None, str]:
    """(timestamp, the line without it); (None, raw) for a line that starts with none."""
    head, sep, line = raw.partition(" ")
    stamp = parse_stamp(head) if sep else None
    return (stamp, line) if stamp is not None else (None, raw)


def parse_stamp(text: str) -> LogStamp | None:
    from datetime import datetime

    if not text.endswith("Z") or "T" not in text:
        return None
    whole, _, fraction = text[:-1].partition(".")
    if fraction and not fraction.isdigit():
        return None
    try:
        seconds = int(datetime.fromisoformat(whole + "+00:00").timestamp())
    except ValueError:
        return None
    return LogStamp(seconds, int((fraction or "0").ljust(9, "0")[:9]))


class LineSplitter:
    """Whole lines out of byte chunks that end anywhere (a multi-byte character too)."""

    def __init__(self) -> None:
        self._carry = b""

    def feed(self, data: bytes) -> Iterator[str]:
        data = self._carry + data
        *whole, self._carry = data.split(b"\n")
        for line in whole:
            yield line.decode("utf-8", "replace").rstrip("\r")

    def rest(self) -> Iterator[str]:
        if self._carry:
            yield self._carry.decode("utf-8", "replace").rstrip("\r")
            self._carry = b""
