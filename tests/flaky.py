"""Find flaky tests: run the suite (or a subset) N times and list every test whose outcome varied.

`make test-flaky N=3` runs it on the whole suite; `make test-flaky N=10 TESTS=tests/flower/cli`
on a subset; `BURN=2` keeps two CPU burners busy beside the runs (a busier machine shifts every
race). Each run writes a JUnit XML file; the outcomes are compared by test id. Exit 0 when every
test had the same outcome in every run and none failed; 1 otherwise; 2 on bad usage.

A test that fails once is a bug to find (docs/CONVENTIONS.md): fix it at its cause, never by a
longer sleep, a looser assertion or a retry.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

OUTCOMES = ("passed", "failed", "error", "skipped")


def outcomes(junit_xml: Path) -> dict[str, str]:
    """Test id -> passed | failed | error | skipped, from one pytest --junitxml file."""
    got: dict[str, str] = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = "failed" if child.tag == "failure" else child.tag
                break
        # A test that fails and whose teardown errors is two testcases of one id: keep the worst.
        if got.get(test_id) not in ("failed", "error"):
            got[test_id] = outcome
    return got


@dataclass
class Verdict:
    """What N runs said of each test."""

    runs: int
    varied: dict[str, list[str]] = field(default_factory=dict)  # id -> outcome per run
    failed_always: list[str] = field(default_factory=list)
    tests: int = 0

    @property
    def clean(self) -> bool:
        return not self.varied and not self.failed_always


def compare(per_run: list[dict[str, str]]) -> Verdict:
    """Tests whose outcome differed between runs (a test absent from a run counts as "absent"),
    and tests that failed in every run."""
    verdict = Verdict(runs=len(per_run))
    ids = sorted(set().union(*per_run)) if per_run else []
    verdict.tests = len(ids)
    for test_id in ids:
        seen = [run.get(test_id, "absent") for run in per_run]
        if len(set(seen)) > 1:
            verdict.varied[test_id] = seen
        elif seen[0] in ("failed", "error"):
            verdict.failed_always.append(test_id)
    return verdict


@contextlib.contextmanager
def burners(count: int) -> Iterator[None]:
    """`count` processes that each keep a core busy while the block runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def run_once(index: int, folder: Path, workers: int, pytest_args: list[str]) -> dict[str, str]:
    report = folder / f"run-{index}.xml"
    xdist = ["-n", str(workers)] if workers > 0 else ["-p", "no:xdist"]
    cmd = [sys.executable, "-m", "pytest", "-q", *xdist, f"--junitxml={report}", *pytest_args]
    started = time.monotonic()
    code = subprocess.call(cmd)
    took = time.monotonic() - started
    got = outcomes(report) if report.is_file() else {}
    bad = sum(1 for outcome in got.values() if outcome in ("failed", "error"))
    print(f"flaky: run {index}: exit {code}, {len(got)} tests, {bad} failed, {took:.0f} s", flush=True)
    return got


def show(verdict: Verdict) -> None:
    print(f"\nflaky: {verdict.tests} tests, {verdict.runs} runs")
    for test_id, seen in verdict.varied.items():
        print(f"  VARIED  {test_id}: {' / '.join(seen)}")
    for test_id in verdict.failed_always:
        print(f"  FAILED  {test_id}: failed in every run")
    if verdict.clean:
        print("  every test had the same outcome in every run, and none failed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.flaky", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="how many times to run (default 3)")
    parser.add_argument("--workers", type=int, default=4, help="pytest-xdist workers, 0 for none")
    parser.add_argument("--burn", type=int, default=0, help="CPU burners beside the runs")
    parser.add_argument("pytest_args", nargs="*", help="tests or pytest options (after --)")
    args = parser.parse_args(argv)
    if args.runs < 2:
        parser.error(f"--runs {args.runs}: needs at least 2 runs to compare")
    if args.workers < 0 or args.burn < 0:
        parser.error("--workers and --burn take a number >= 0")
    with tempfile.TemporaryDirectory(prefix="fb-flaky-") as tmp, burners(args.burn):
        per_run = [run_once(i + 1, Path(tmp), args.workers, args.pytest_args) for i in range(args.runs)]
    verdict = compare(per_run)
    show(verdict)
    return 0 if verdict.clean else 1


if __name__ == "__main__":
    sys.exit(main())
