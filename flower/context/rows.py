"""Parsing many stored JSON rows fast: the loader of a long transcript.

Profiled on a 50,000-entry session (bench/prune_load.py): about half the time of
``json.loads`` over every row went to Python's cyclic garbage collector, which ran again and
again over the growing heap of freshly parsed dicts; most of the rest was the parser itself.
So `parse_rows` parses with orjson (about twice as fast as the stdlib) while the collector is
paused. Parsed JSON holds no reference cycles, so reference counting still frees all of it.

A row orjson rejects but the stdlib accepts (NaN, 1e400, a lone surrogate escape) is parsed
by the stdlib, and so is a row with a run of 19 or more digits: orjson reads
an integer outside 64 bits as a float, silently. So every row reads back exactly as
``json.loads`` would read it.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson

# An integer literal that may not fit 64 bits has 19 digits or more (int64 ends at 19). Every byte
# but a digit is mapped to a space and every digit to "0", so a run is one substring search, in C:
# a tenth of the cost of a regular expression. A run inside a string matches too: that row only
# takes the slower exact path.
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"0" * 19


def _has_long_digit_run(payload: str | bytes) -> bool:
    data = payload.encode("utf-8", "surrogatepass") if isinstance(payload, str) else payload
    return _LONG_RUN in data.translate(_DIGITS_AS_ZERO)


_lock = threading.Lock()
_pausers = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off for the block, then back as it was. Nested and concurrent
    blocks (loads run in worker threads) share one pause: the last one out restores it."""
    global _pausers, _was_enabled
    with _lock:
        if _pausers == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pausers += 1
    try:
        yield
    finally:
        with _lock:
            _pausers -= 1
            if _pausers == 0 and _was_enabled:
                gc.enable()


def parse_row(payload: str | bytes) -> Any:
    """One JSON document, as ``json.loads`` reads it."""
    if _has_long_digit_run(payload):
        return json.loads(payload)
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return json.loads(payload)


def parse_rows(payloads: Iterable[str | bytes]) -> list[Any]:
    """Every payload parsed, in order, with the collector paused."""
    with gc_paused():
        return [parse_row(p) for p in payloads]
