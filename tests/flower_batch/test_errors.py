"""flower_batch/errors.py: the tree's helpers (the tree itself is exercised by every command's tests)."""

from __future__ import annotations

from flower_batch.errors import FieldError, escape_controls


def test_escape_controls_shows_a_newline_as_written_and_keeps_the_rest() -> None:
    # Not flower.exitinfo.one_line: a newline in a jobs.toml key is shown, not folded into a space.
    assert escape_controls('key "x\ny"\tand\x1b[31m') == 'key "x\\ny"\\tand\\x1b[31m'
    assert escape_controls("  two  spaces, ünïcode  ") == "  two  spaces, ünïcode  "


def test_a_field_error_is_one_line_with_its_controls_escaped() -> None:
    assert str(FieldError("jobs.toml", 3, "a\nb", "unknown key")) == "jobs.toml:3: a\\nb: unknown key"
    assert str(FieldError("jobs.toml", None, "", "no [tasks]")) == "jobs.toml: no [tasks]"
