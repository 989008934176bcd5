"""A job's `container.log`, capped: a 10-hour job must not leave gigabytes of output behind.

Each run of the job's container (each `--- container` section) keeps its first HEAD_BYTES and
its last TAIL_BYTES of output; what lies between is replaced by one line saying how much was
left out. The tail is what `show`, the matrix's log tails and `wake`'s banner read, so it is
kept to its last line. The output is the job's model-written code's, so no line is trusted to be
short: each is cut to MAX_LINE_BYTES (flower_batch/outputlines.py, where the backends split the
output) with a mark saying how much went, and the file stays under head + tail + one line of
overhead. Memory: at most TAIL_BYTES + one line while a run's log is saved.

`capped_text` is the same cap in memory, for the check's output (which goes into the record).
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import TextIO

from flower_batch.outputlines import MAX_LINE_BYTES, cut_line

HEAD_BYTES = 1024 * 1024
TAIL_BYTES = 4 * 1024 * 1024
CHECK_HEAD_BYTES = 64 * 1024  # the check's output kept in its record and check.log: its head
CHECK_TAIL_BYTES = 192 * 1024  # ... and its tail, where a test runner prints its summary
ELIDED_MARK = "--- container.log: "  # the start of the line that says what was left out


def _size(text: str) -> int:
    return len(text.encode("utf-8", "replace"))


class _HeadTail:
    """Lines into `out` while the head has room, then a sliding tail written at `finish`."""

    def __init__(self, out: TextIO, head_bytes: int, tail_bytes: int, what: str) -> None:
        self.out = out
        self.head_bytes, self.tail_bytes = head_bytes, tail_bytes
        self.what = what
        # No line longer than the smaller cap: then the tail's bound holds for its last line too.
        self.line_bytes = max(1, min(MAX_LINE_BYTES, head_bytes or tail_bytes, tail_bytes))
        self._head = 0  # bytes written before the tail started
        self._tail: deque[tuple[str, int]] = deque()
        self._tail_size = 0
        self._dropped_lines = 0
        self._dropped_bytes = 0

    def write_line(self, line: str) -> None:
        text = cut_line(line, self.line_bytes - 1) + "\n"
        size = _size(text)
        if not self._tail and self._head + size <= self.head_bytes:
            self.out.write(text)
            self._head += size
            return
        self._tail.append((text, size))
        self._tail_size += size
        while self._tail_size > self.tail_bytes and len(self._tail) > 1:
            _, gone = self._tail.popleft()
            self._tail_size -= gone
            self._dropped_lines += 1
            self._dropped_bytes += gone

    def finish(self) -> None:
        if self._dropped_lines:
            self.out.write(
                f"{ELIDED_MARK}{self._dropped_lines} lines ({self._dropped_bytes} bytes) left out: "
                f"{self.what} keeps its first {self.head_bytes} and last {self.tail_bytes} bytes ---\n"
            )
        self.out.writelines(text for text, _ in self._tail)
        self._tail.clear()


class CappedLog:
    """Appends one run's lines to a log file, keeping its head and tail (see module docstring)."""

    def __init__(self, path: Path, head_bytes: int | None = None, tail_bytes: int | None = None) -> None:
        self.path = Path(path)
        self.head_bytes = HEAD_BYTES if head_bytes is None else head_bytes
        self.tail_bytes = TAIL_BYTES if tail_bytes is None else tail_bytes
        self._out = self.path.open("a", encoding="utf-8", errors="replace")
        self._cap = _HeadTail(self._out, self.head_bytes, self.tail_bytes, "each run")

    def write_line(self, line: str) -> None:
        self._cap.write_line(line)

    def close(self) -> None:
        self._cap.finish()
        self._out.close()

    def __enter__(self) -> CappedLog:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


async def save_capped(lines: AsyncIterator[str], path: Path, header: str) -> None:
    """Append `header` and the lines of one run to `path`, capped."""
    with CappedLog(path) as log:
        log.write_line(header)
        async for line in lines:
            log.write_line(line)


async def capped_text(
    lines: AsyncIterator[str], head_bytes: int = CHECK_HEAD_BYTES, tail_bytes: int = CHECK_TAIL_BYTES
) -> str:
    """The lines joined by newlines, capped like a run's log (the check's output: runner.run_check).
    Memory: at most head + tail + one line, however much the check printed."""
    out = io.StringIO()
    cap = _HeadTail(out, head_bytes, tail_bytes, "the check's output")
    async for line in lines:
        cap.write_line(line)
    cap.finish()
    return out.getvalue().removesuffix("\n")
