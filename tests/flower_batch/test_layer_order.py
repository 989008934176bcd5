"""flower_batch's layer order (docs/architecture.md): every module and subpackage is in one layer,
each imports only its own layer or the layers below, and the running layer loads on its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.flower_batch.test_layering import ROOT, imported_modules

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
        for module in imported_modules(path):
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
