"""A container's output as lines, none longer than MAX_LINE_BYTES: the output is the job's
model-written code's, and one line without a newline may be gigabytes long.

A longer line is cut at the limit; its rest is dropped (never held) and the line ends with
`CUT_MARK` saying how many bytes went. Every reader of a container's output splits it here
(the backends' `logs`), and joblog's caps count on it.
"""

from __future__ import annotations

from collections.abc import Iterator

MAX_LINE_BYTES = 64 * 1024
CUT_MARK = " [flower-batch: {n} more bytes of this line cut]"
_MARK_ROOM = 64  # bytes the mark takes at most (a 20-digit count)


def cut_line(line: str, limit: int = MAX_LINE_BYTES) -> str:
    """`line` if it is at most `limit` bytes of UTF-8, else its first bytes and the cut mark."""
    if len(line) * 4 <= limit:  # cheap: no character is more than 4 bytes
        return line
    raw = line.encode("utf-8", "replace")
    if len(raw) <= limit:
        return line
    keep = max(0, limit - _MARK_ROOM)
    return raw[:keep].decode("utf-8", "replace") + CUT_MARK.format(n=len(raw) - keep)


class LineSplitter:
    """Lines out of byte chunks that end anywhere, each cut to `limit` bytes (module docstring).
    Memory: at most `limit` bytes carried between chunks, whatever the output."""

    def __init__(self, limit: int = MAX_LINE_BYTES, *, strip_cr: bool = False) -> None:
        self.limit = limit
        self.strip_cr = strip_cr
        self._carry = bytearray()
        self._dropped = 0

    def feed(self, data: bytes) -> Iterator[str]:
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._take(data, start, end)
            yield self._line()
            start = end + 1
        self._take(data, start, len(data))

    def rest(self) -> Iterator[str]:
        """The last line, when the output did not end with a newline."""
        if self._carry or self._dropped:
            yield self._line()

    def _take(self, data: bytes, start: int, end: int) -> None:
        room = max(0, self.limit - len(self._carry))
        self._carry += data[start : min(end, start + room)]
        self._dropped += max(0, end - start - room)

    def _line(self) -> str:
        carry, dropped = self._carry, self._dropped
        self._carry, self._dropped = bytearray(), 0
        if dropped:  # the mark fits within the limit too, so cut_line passes the line as it is
            keep = max(0, self.limit - _MARK_ROOM)
            text = carry[:keep].decode("utf-8", "replace") + CUT_MARK.format(n=dropped + len(carry) - keep)
        else:
            text = carry.decode("utf-8", "replace")
        return text.rstrip("\r") if self.strip_cr else text
