"""Parsing many stored JSON rows fast: the loader of a long transcript.

Profiled on a 50,000-entry session (bench/prune_load.py): about half the time of
``json.loads`` over every row went to Python's cyclic garbage collector, which ran again and
again over the growing heap of freshly parsed dicts; most of the rest was the parser itself.
So `parse_rows` parses with orjson (about twice as fast as the stdlib) while the collector is
paused. Parsed JSON holds no reference cycles, so reference counting still frees all of it.

A row orjson rejects but the stdlib accepts (NaN, integers past 64 bits, a lone surrogate
escape, nesting past 1,024 levels) is parsed by the stdlib, so every row reads back exactly as
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
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return json.loads(payload)


def parse_rows(payloads: Iterable[str | bytes]) -> list[Any]:
    """Every payload parsed, in order, with the collector paused."""
    with gc_paused():
        return [parse_row(p) for p in payloads]
