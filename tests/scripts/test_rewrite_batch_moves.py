"""scripts/rewrite_batch_moves.py, on the moves docs/moves.md lists: old imports become the new
ones, a module moved out of the package root keeps its meaning, and a second run changes nothing."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
moves = importlib.import_module("rewrite_batch_moves")
MODULES, NAMES = moves.tables()

CASES = [
    # (file the text is in, old text, new text)
    ("tests/test_x.py", "from flower_batch import errors, runner\n",
     "from flower_batch.running import runner\nfrom flower_batch import errors\n"),
    ("tests/test_x.py", "from flower_batch import cmd_common, jobs_cmd\n",
     "from flower_batch.commands import common as cmd_common, jobs as jobs_cmd\n"),
    ("tests/test_x.py", 'monkeypatch.setattr("flower_batch.scheduler.run_job", f)\nimport flower_batch.matrix_cmd\n',
     'monkeypatch.setattr("flower_batch.running.scheduler.run_job", f)\nimport flower_batch.commands.matrix\n'),
    ("tests/test_x.py", "from flower_batch.cli import _run_async, app\n",  # a name moved, and its module since
     "from flower_batch.commands.common import run_async as _run_async\nfrom flower_batch.cli import app\n"),
    ("tests/test_x.py", "from tests.test_matrix_results import results\n",
     "from tests.flower_batch.reports.test_results import results\n"),
    ("flower_batch/cli.py", "from .jobs_cmd import run\nfrom .errors import FlowerBatchError\n",
     "from flower_batch.commands.jobs import run\nfrom .errors import FlowerBatchError\n"),
    ("flower_batch/gateway/x.py", "from ..image import build_image\n",
     "from flower_batch.running.image import build_image\n"),
    # merged from a branch that edited flower_batch/matrix_cmd.py: imports relative to the old place
    ("flower_batch/commands/matrix.py",
     "from .matrix import JobSpec\nfrom .cmd_common import fail\nfrom .attempts import prunable\nfrom .errors import X\n",
     "from flower_batch.matrix import JobSpec\nfrom flower_batch.commands.common import fail\n"
     "from flower_batch.running.attempts import prunable\nfrom flower_batch.errors import X\n"),
    # written at the new place: left as it is
    ("flower_batch/running/runner.py", "from ..errors import X\n", "from ..errors import X\n"),
    ("flower_batch/commands/jobs.py", "from .common import fail\n", "from .common import fail\n"),
    # a module moved earlier (out of matrix/) keeps its relative imports
    ("flower_batch/jobsfile/_expand.py", "from ._combos import combinations\n", "from ._combos import combinations\n"),
]


@pytest.mark.parametrize(("where", "old", "new"), CASES)
def test_old_imports_become_the_new_ones_and_a_second_run_changes_nothing(where: str, old: str, new: str) -> None:
    once = moves.rewrite(old, REPO / where, MODULES, NAMES)
    assert once == new
    assert moves.rewrite(once, REPO / where, MODULES, NAMES) == once


def test_every_module_the_table_names_exists() -> None:
    def exists(module: str) -> bool:
        where = REPO.joinpath(*module.split("."))
        return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()

    assert {"flower_batch.runner", "flower_batch.cmd_common", "tests.test_batch_review_fixes"} <= set(MODULES)
    assert [new for new in MODULES.values() if not exists(new)] == []
    assert [old for old in MODULES if exists(old)] == []  # every move was made: nothing left at an old path
