"""The suite's parallel runs (tests/parallel.py): a module-scoped fixture's tests run on one
worker (the fixture made once), the others are spread (pytest-xdist, as `make test` runs it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SAMPLE = """
import os
import pytest


@pytest.fixture(scope="module")
def made_once():
    return os.environ["PYTEST_XDIST_WORKER"]


@pytest.mark.parametrize("i", range(6))
def test_shares(made_once, i):
    assert made_once == os.environ["PYTEST_XDIST_WORKER"]


@pytest.mark.parametrize("i", range(6))
def test_alone(i):
    pass
"""


def test_grouped_tests_run_on_one_worker_and_the_others_spread(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    shutil.copy(REPO / "tests" / "conftest.py", tmp_path / "tests" / "conftest.py")
    (tmp_path / "tests" / "test_sample.py").write_text(SAMPLE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "FB_TEST_SWARM_PREFIX": "fbunitpar"}
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "3", "-v", "tests"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ran = re.findall(r"\[(gw\d)\] .*PASSED tests/test_sample.py::(test_\w+)\[", proc.stdout)
    shares = {w for w, name in ran if name == "test_shares"}
    alone = {w for w, name in ran if name == "test_alone"}
    assert len([1 for _, n in ran if n == "test_shares"]) == 6 and len(shares) == 1, proc.stdout
    assert len(alone) > 1, proc.stdout  # spread over the workers
