"""flower_batch's layers: no module imports another package's private module, and the job model
(flower_batch/jobmodel/) is a bottom layer that layout and backend use without the matrix package."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import flower_batch

ROOT = Path(flower_batch.__file__).parent


def imported_modules(path: Path) -> list[str]:
    """The absolute module each `from X import` of the file names."""
    package = ["flower_batch", *path.relative_to(ROOT).parent.parts]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            found.append(".".join([*base, *([node.module] if node.module else [])]))
    return found


def test_no_module_imports_a_private_module_of_another_package() -> None:
    stray = []
    for path in ROOT.rglob("*.py"):
        own = ".".join(["flower_batch", *path.relative_to(ROOT).parent.parts])
        for module in imported_modules(path):
            parent, _, leaf = module.rpartition(".")
            if leaf.startswith("_") and not leaf.startswith("__") and parent != own:
                stray.append(f"{path.relative_to(ROOT)} imports {module}")
    assert stray == []


def test_the_job_model_layout_and_backend_load_without_the_matrix_package() -> None:
    code = ("import sys, flower_batch.jobmodel.record, flower_batch.jobmodel.classes, flower_batch.layout,"
            " flower_batch.backend.base\nprint(sorted(m for m in sys.modules if m.startswith('flower_batch.matrix')))")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "[]"


def _loads(module: str, other: str) -> bool:
    code = f"import sys, {module}\nprint({other!r} in sys.modules)"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "True"


def test_parsing_a_jobs_file_loads_no_reports_and_reports_load_no_parser() -> None:
    assert not _loads("flower_batch.jobsfile", "flower_batch.reports")
    assert not _loads("flower_batch.reports", "flower_batch.jobsfile")
    assert _loads("flower_batch.matrix", "flower_batch.reports")  # the check can see a loaded package

