"""Small pure helpers: durations, memory sizes, labels, line lookup, templates."""

from __future__ import annotations

import pytest

from flower_batch.errors import TemplateError
from flower_batch.jobsfile._ids import value_label
from flower_batch.jobsfile._locate import KeyLines
from flower_batch.jobsfile._templating import RenderContext, Template
from flower_batch.matrix import format_duration, parse_duration, parse_memory, slugify


@pytest.mark.parametrize(
    "text, seconds",
    [(90, 90.0), (1.5, 1.5), ("45", 45.0), ("90s", 90.0), ("10m", 600.0), ("1h30m", 5400.0),
     ("1h 30m", 5400.0), ("1.5h", 5400.0), ("500ms", 0.5), ("2d", 172800.0)],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["ten", "", "10 minutes", "m10", 0, -5, True, "0s", None, "10m x"])
def test_bad_durations(text):
    assert parse_duration(text) is None


@pytest.mark.parametrize(
    "text, size",
    [(1048576, 1048576), ("512m", 512 * 1024**2), ("2g", 2 * 1024**3), ("1.5GiB", int(1.5 * 1024**3)),
     ("64MB", 64 * 1024**2), ("100k", 102400), ("4096", 4096)],
)
def test_memory(text, size):
    assert parse_memory(text) == size


@pytest.mark.parametrize("text", ["lots", "", "-1g", 0, True, "2 gigs"])
def test_bad_memory(text):
    assert parse_memory(text) is None


def test_format_duration():
    assert [format_duration(s) for s in (None, 0.42, 12.4, 185, 3725)] == ["?", "0.4s", "12s", "3m05s", "1h02m"]


def test_labels():
    assert slugify("Claude Sonnet 4.5!") == "claude-sonnet-4-5"
    assert value_label("model", "claude-sonnet-4-5") == "claude-sonnet-4-5"
    assert value_label("temperature", 0.2) == "temperature-0-2"
    assert value_label("verbose", True) == "verbose" and value_label("verbose", False) == "no-verbose"
    assert value_label("variant", {"name": "Careful One", "workflow": "m:a"}) == "careful-one"
    assert value_label("env", {"LEVEL": "high", "N": 3}) == "high-3"
    long_a, long_b = value_label("p", "x" * 100 + "a"), value_label("p", "x" * 100 + "b")
    assert len(long_a) == 40 and long_a != long_b
    assert value_label("p", "!!!") == "p"


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


def test_template_rendering_and_errors():
    context = RenderContext({"task": "a", "v": {"name": "Careful", "t": 3}, "flag": True}, "a", "a.careful.r2", 2)
    assert Template("${{matrix.v}}/${{ matrix.v.t }}/${{ matrix.flag }}/${{ job.repeat }}", ()).render(context) == "Careful/3/true/2"
    assert Template("x ${{ matrix.v }", ()).syntax_problem() == "unclosed `${{`; close it with `}}`"
    assert Template("${{ env.HOME }}", ()).syntax_problem().startswith("unknown reference `${{ env.HOME }}`")
    with pytest.raises(TemplateError) as info:
        Template("${{ matrix.v.nope }}", ()).render(context)
    assert str(info.value) == "`${{ matrix.v.nope }}`: matrix.v has no key `nope` in job a.careful.r2"
    with pytest.raises(TemplateError):
        Template("${{ matrix.v2 }}", ()).render(RenderContext({"v2": {"x": 1}}, "a", "a.r1", 1))
