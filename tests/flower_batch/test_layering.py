"""flower_batch's layers: each module imports only its own layer or the ones below, no module
imports another package's private module, and the job model (flower_batch/jobmodel/) is a
bottom layer that layout and backend use without the matrix package."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import flower_batch

ROOT = Path(flower_batch.__file__).parent


def _imports(path: Path) -> list[str]:
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
        for module in _imports(path):
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


# The layers, bottom to top (docs/architecture.md): a module imports only from its own layer or
# the ones below. Every module and subpackage of flower_batch is in exactly one of them.
LAYERS: list[tuple[str, set[str]]] = [
    ("foundation", {"flower_batch", "errors", "envnames", "workspace_diff"}),
    ("job model", {"jobmodel"}),
    ("layout", {"layout", "labels"}),
    ("backend", {"backend"}),
    ("gateway", {"gateway"}),
    ("jobs file", {"jobsfile"}),
    ("running", {"running"}),
    ("pre-flight", {"preflight"}),
    ("reports", {"reports", "compare", "view"}),
    ("matrix", {"matrix"}),  # only gathers the public names of jobmodel, jobsfile and reports
    ("command line", {"commands", "cli"}),
]
# The one import that points up: a gateway mode's label, one table for the job model and the gateway.
UPWARD = {("flower_batch.jobmodel.spec", "flower_batch.gateway.host_modes")}


def _part(module: str) -> str:
    """`flower_batch.running.runner` -> `running`; `flower_batch` (its __init__) -> `flower_batch`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _rank(module: str) -> int:
    (rank,) = [i for i, (_, parts) in enumerate(LAYERS) if _part(module) in parts]
    return rank


def _module_of(path: Path) -> str:
    parts = ["flower_batch", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_module_and_subpackage_is_in_one_layer() -> None:
    tops = {path.stem if path.is_file() else path.name for path in ROOT.iterdir()
            if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()}
    placed = [part for _, parts in LAYERS for part in parts]
    assert len(placed) == len(set(placed))
    assert tops - set(placed) == set()
    assert {"running", "commands", "jobmodel", "jobsfile", "reports"} <= tops  # the layout this test is about


def test_each_module_imports_only_its_own_layer_or_the_layers_below() -> None:
    upward = []
    for path in ROOT.rglob("*.py"):
        me = _module_of(path)
        for module in _imports(path):
            if module.startswith("flower_batch") and _rank(module) > _rank(me) and (me, module) not in UPWARD:
                upward.append(f"{me} ({LAYERS[_rank(me)][0]}) imports {module} ({LAYERS[_rank(module)][0]})")
    assert upward == []


def test_running_loads_without_reports_preflight_or_the_command_line() -> None:
    code = ("import sys, flower_batch.running.scheduler, flower_batch.running.jobs, flower_batch.running.repro,"
            " flower_batch.running.image\nprint(sorted({m.split('.')[1] for m in sys.modules if m.startswith("
            "('flower_batch.matrix', 'flower_batch.reports', 'flower_batch.preflight', 'flower_batch.commands',"
            " 'flower_batch.cli'))}))")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "[]"
