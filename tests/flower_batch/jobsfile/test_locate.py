"""Line lookup in jobs.toml (jobsfile/_locate.py): headers, dotted keys, inline tables, arrays of tables."""

from __future__ import annotations

from flower_batch.jobsfile import KeyLines


def test_key_lines_cover_headers_dotted_inline_and_arrays_of_tables():
    text = '''# top
[defaults]
image = "x"  # comment
env = { A = "1", "B.C" = 'x' }
gateway.mode = "scripted"

[tasks.fizz]
prompt = """multi
line [ { "
"""
timeout = "ten"

[matrix]
variant = [
  { name = "careful", workflow = "a:b" },  # one
  # between
  { name = "quick",
    timeout = "5m" },
]

[[jobs]]
name = "a"
[[jobs]]
name = "b"
[jobs.env]
X = "1"
'''
    lines = KeyLines(text)
    expected = {
        ("defaults", "image"): 3,
        ("defaults", "env", "B.C"): 4,
        ("defaults", "gateway", "mode"): 5,
        ("tasks", "fizz", "timeout"): 11,
        ("matrix", "variant", 0, "workflow"): 15,
        ("matrix", "variant", 1): 17,
        ("matrix", "variant", 1, "timeout"): 18,
        ("jobs", 0): 21,
        ("jobs", 1, "name"): 24,
        ("jobs", 1, "env", "X"): 26,
        ("tasks", "fizz", "nonexistent"): 7,  # falls back to the nearest ancestor
    }
    assert {path: lines.line_of(path) for path in expected} == expected
    assert lines.line_of(("nothing",)) is None
