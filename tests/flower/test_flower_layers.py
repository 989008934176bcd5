"""flower's layers (docs/architecture.md): no import cycle, and no module imports a layer above
its own — a lazy import inside a function or one under TYPE_CHECKING counts too."""

from __future__ import annotations

from pathlib import Path

import flower
from tests.layering import Import, cycles, imports, upward

ROOT = Path(flower.__file__).parent
# Bottom to top. scripted depends on nothing else in flower (flower_batch's gateway runs it).
LAYERS = {
    "scripted": ["flower.scripted"],
    "foundation": [
        f"flower.{m}"
        for m in (
            "catalogue",
            "clock",
            "errors",
            "events",
            "exitinfo",
            "fileio",
            "full_disk",
            "protocols",
            "quick_exit",
            "result",
            "spec",
            "versions",
        )
    ],
    "context": ["flower.context"],
    "runtime": ["flower.runtime"],
    "flows": ["flower.flows"],
    "starter": ["flower.starter"],  # the ready-made flow, on the engine
    "command line": ["flower", "flower.__main__", "flower.cli"],  # flower/__init__ exports names lazily
}


def test_no_import_cycle() -> None:
    assert cycles(imports(ROOT)) == []


def test_no_module_imports_a_layer_above_its_own() -> None:
    assert upward(imports(ROOT), LAYERS) == []


def test_every_foundation_module_is_in_the_table() -> None:
    # the foundation's one package: the catalogue, its texts and names in their owners' modules
    top = ({p.stem for p in ROOT.glob("*.py")} - {"__init__", "__main__"}) | {"catalogue"}
    assert {f"flower.{m}" for m in top} == set(LAYERS["foundation"])


def test_the_checks_see_an_upward_import() -> None:
    edges = [
        Import("flower.flows.workflow", 1, "flower.runtime.engine"),
        Import("flower.runtime.engine", 2, "flower.flows.workflow"),
    ]
    assert cycles(edges) == [["flower.flows.workflow", "flower.runtime.engine"]]
    assert upward(edges, LAYERS) == [
        "flower.runtime.engine:2 (runtime) imports flower.flows.workflow (flows)"
    ]
