"""flower_batch's layer order (docs/architecture.md): every module and subpackage is in one layer of
the table test_layering.py checks imports against, and the running layer loads on its own."""

from __future__ import annotations

import subprocess
import sys

from tests.flower_batch.test_layering import LAYERS, ROOT


def _tops(layers: dict[str, list[str]]) -> list[str]:
    """The module or subpackage names directly under flower_batch that the layer table places."""
    return [m.split(".")[1] if "." in m else m for parts in layers.values() for m in parts]


def test_every_module_and_subpackage_is_in_one_layer() -> None:
    tops = {
        path.stem if path.is_file() else path.name
        for path in ROOT.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
    }
    placed = _tops(LAYERS)
    assert len(placed) == len(set(placed))
    assert tops - set(placed) == set()
    assert {"running", "commands", "jobmodel", "jobsfile", "reports"} <= tops  # the layout this test is about


def test_running_loads_without_reports_preflight_or_the_command_line() -> None:
    code = (
        "import sys, flower_batch.running.scheduler, flower_batch.running.jobs, flower_batch.running.repro,"
        " flower_batch.running.image\nprint(sorted({m.split('.')[1] for m in sys.modules if m.startswith("
        "('flower_batch.reports', 'flower_batch.preflight', 'flower_batch.commands',"
        " 'flower_batch.cli'))}))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "[]"
