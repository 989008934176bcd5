"""Reading a Swarm service's log as it streams (pure helpers): lines split from chunks, and the
timestamp Swarm puts before each line (`timestamps=True`), which is how a followed log asks only
for what is new (the API's `since` is to the second; the timestamp tells the lines of that second
already seen from the new ones)."""

from __future__ import annotations

from dataclasses import dataclass

from flower_batch.outputlines import LineSplitter as BoundedSplitter

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


class LineSplitter(BoundedSplitter):
    """Whole lines out of byte chunks that end anywhere, each cut to MAX_LINE_BYTES
    (outputlines.py: a task's output is hostile), a trailing \\r dropped."""

    def __init__(self) -> None:
        super().__init__(strip_cr=True)
