"""flower.context.rows: stored JSON rows read back exactly as json.loads reads them, with the
cyclic GC paused for the parse and restored after, also when pauses nest or overlap."""

from __future__ import annotations

import gc
import json
import threading

import pytest

from flower.context.rows import gc_paused, parse_row, parse_rows

# Rows orjson rejects or might read differently; each must come back as json.loads reads it.
ODD_ROWS = [
    '{"usage": {"input_tokens": NaN, "x": Infinity, "y": -Infinity}}',
    '{"big": 123456789012345678901234567890, "neg": -98765432109876543210}',
    '{"below int64": -9223372036854775809, "id": "toolu_12345678901234567890"}',
    '{"text": "lone \\ud800 surrogate"}',
    '{"a": 1, "a": 2}',
    '{"f": 0.1, "g": 1e308, "h": -0.0, "i": 5e-324, "j": 1e400}',
    '{"u": "继续 ✓ \\u00e9", "e": "\\n\\t\\""}',
    "[" * 500 + "]" * 500,
    '  {"padded": true}  ',
]


@pytest.mark.parametrize("row", ODD_ROWS, ids=range(len(ODD_ROWS)))
def test_each_row_reads_back_as_json_loads_reads_it(row):
    expected = json.loads(row)
    got = parse_row(row)
    assert json.dumps(got) == json.dumps(expected)  # NaN != NaN, so compare the serialisation
    assert parse_row(row.encode("utf-8")) is not None


def test_invalid_json_still_fails_loudly():
    with pytest.raises(json.JSONDecodeError):
        parse_row('{"cut off": ')


def test_parse_rows_keeps_order_and_values():
    rows = [json.dumps({"n": n, "s": "x" * n}) for n in range(200)] + ODD_ROWS[:2]
    assert json.dumps(parse_rows(rows)) == json.dumps([json.loads(r) for r in rows])


def test_gc_is_paused_inside_and_restored_after():
    assert gc.isenabled()
    seen = []

    def spy():
        for n in range(3):
            seen.append(gc.isenabled())
            yield json.dumps({"n": n})

    parse_rows(spy())
    assert seen == [False, False, False]
    assert gc.isenabled()


def test_a_disabled_gc_stays_disabled():
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_gc_comes_back_after_an_error():
    with pytest.raises(json.JSONDecodeError), gc_paused():
        parse_rows(['{"ok": 1}', "not json"])
    assert gc.isenabled()


def test_overlapping_pauses_in_threads_restore_gc_only_when_the_last_ends():
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    states = {}

    def first():
        with gc_paused():
            first_in.set()
            second_in.wait(5)
        states["after first"] = gc.isenabled()
        first_out.set()

    def second():
        first_in.wait(5)
        with gc_paused():
            second_in.set()
            first_out.wait(5)
            states["second, first gone"] = gc.isenabled()
        states["after both"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert states == {"after first": False, "second, first gone": False, "after both": True}
