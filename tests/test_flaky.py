"""`make test-flaky` (tests/flaky.py): a test whose outcome varies between runs is listed, one that
fails every time is listed, a stable one is not; the exit code says whether the runs were clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.flaky import compare, outcomes

REPO = Path(__file__).resolve().parents[1]

SAMPLE = """
from pathlib import Path

COUNTER = Path(__file__).with_name("runs.txt")


def test_stable():
    assert True


def test_flips():
    runs = int(COUNTER.read_text()) if COUNTER.exists() else 0
    COUNTER.write_text(str(runs + 1))
    assert runs % 2 == 0, "fails on every second run"


def test_broken():
    assert False
"""


def flaky(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.flaky", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_a_varying_test_and_an_always_failing_one_are_listed(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text(SAMPLE)
    got = flaky("--runs", "2", "--workers", "0", "--", str(sample), "-p", "no:cacheprovider")
    assert got.returncode == 1, got.stdout + got.stderr
    lines = got.stdout.splitlines()
    assert any("VARIED" in line and "test_flips" in line and "passed / failed" in line for line in lines)
    assert any("FAILED" in line and "test_broken" in line for line in lines)
    assert not any("test_stable" in line for line in lines)
    assert "flaky: run 2: exit 1, 3 tests" in got.stdout


@pytest.mark.slow
def test_clean_runs_exit_0(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text("def test_ok():\n    assert True\n")
    got = flaky("--runs", "2", "--workers", "0", "--", str(sample), "-p", "no:cacheprovider")
    assert got.returncode == 0, got.stdout + got.stderr
    assert "every test had the same outcome in every run" in got.stdout


def test_one_run_is_refused():
    got = flaky("--runs", "1")
    assert got.returncode == 2 and "needs at least 2 runs" in got.stderr


def test_outcomes_keep_the_worst_of_a_call_and_its_teardown(tmp_path):
    report = tmp_path / "r.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="m" name="t"><failure message="x"/></testcase>'
        '<testcase classname="m" name="t"><error message="teardown"/></testcase>'
        '<testcase classname="m" name="s"><skipped message="no docker"/></testcase>'
        '<testcase classname="m" name="p"/>'
        "</testsuite></testsuites>"
    )
    assert outcomes(report) == {"m::t": "failed", "m::s": "skipped", "m::p": "passed"}


def test_a_test_missing_from_one_run_varied():
    verdict = compare([{"a": "passed", "b": "passed"}, {"a": "passed"}])
    assert verdict.varied == {"b": ["passed", "absent"]} and not verdict.failed_always
