"""The one clock: to the second for records and exit files, to the millisecond for flower's
manifest (its step durations come from it), both UTC (flower_batch's
records: tests/flower_batch/running/test_runner.py)."""

from __future__ import annotations

import json
import re

from flower.clock import now_iso
from flower.result import StepResult

SECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$")
MILLISECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$")


def test_records_are_stamped_to_the_second_and_steps_to_the_millisecond() -> None:
    assert SECONDS.match(now_iso())
    assert MILLISECONDS.match(now_iso("milliseconds"))
    assert MILLISECONDS.match(StepResult(step="s").started_at)


def test_an_exit_file_is_stamped_to_the_second(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from flower import exitinfo

    exitinfo.leave(tmp_path, code=0, kind="done", reason="ok")
    assert SECONDS.match(json.loads(exitinfo.exit_path(tmp_path).read_text())["at"])
