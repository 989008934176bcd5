"""A job's `container.log`, capped: a 10-hour job must not leave gigabytes of output behind.

Each run of the job's container (each `--- container` section) keeps its first HEAD_BYTES and
its last TAIL_BYTES of output; what lies between is replaced by one line saying how much was
left out. The tail is what `show`, the matrix's log tails and `wake`'s banner read, so it is
always kept whole, up to the last line. Memory: at most TAIL_BYTES while a run's log is saved.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType

HEAD_BYTES = 1024 * 1024
TAIL_BYTES = 4 * 1024 * 1024
ELIDED_MARK = "--- container.log: "  # the start of the line that says what was left out


class CappedLog:
    """Appends one run's lines to a log file, keeping its head and tail (see module docstring)."""

    def __init__(self, path: Path, head_bytes: int | None = None, tail_bytes: int | None = None) -> None:
        self.path = Path(path)
        self.head_bytes = HEAD_BYTES if head_bytes is None else head_bytes
        self.tail_bytes = TAIL_BYTES if tail_bytes is None else tail_bytes
        self._out = self.path.open("a", encoding="utf-8")
        self._head = 0  # bytes written before the tail started
        self._tail: deque[str] = deque()
        self._tail_size = 0
        self._dropped_lines = 0
        self._dropped_bytes = 0

    def write_line(self, line: str) -> None:
        text = line + "\n"
        size = len(text.encode("utf-8", "replace"))
        if not self._tail and self._head + size <= self.head_bytes:
            self._out.write(text)
            self._head += size
            return
        self._tail.append(text)
        self._tail_size += size
        while self._tail_size > self.tail_bytes and len(self._tail) > 1:
            gone = self._tail.popleft()
            gone_size = len(gone.encode("utf-8", "replace"))
            self._tail_size -= gone_size
            self._dropped_lines += 1
            self._dropped_bytes += gone_size

    def close(self) -> None:
        if self._dropped_lines:
            self._out.write(
                f"{ELIDED_MARK}{self._dropped_lines} lines ({self._dropped_bytes} bytes) left out: "
                f"each run keeps its first {self.head_bytes} and last {self.tail_bytes} bytes ---\n"
            )
        self._out.writelines(self._tail)
        self._tail.clear()
        self._out.close()

    def __enter__(self) -> CappedLog:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


async def save_capped(lines: AsyncIterator[str], path: Path, header: str) -> None:
    """Append `header` and the lines of one run to `path`, capped."""
    with CappedLog(path) as log:
        log.write_line(header)
        async for line in lines:
            log.write_line(line)
