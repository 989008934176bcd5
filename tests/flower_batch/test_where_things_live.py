"""Folders say what they hold (issue 19): the modules containers run exist where their commands
name them, each subpackage's docstring names its modules, labels have one table, and the
migration layer is gone."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

import flower
import flower_batch
from flower_batch import labels

ROOT = Path(flower_batch.__file__).parent
REPO = ROOT.parent
SUBPACKAGES = [
    ROOT / "backend" / "docker",
    ROOT / "backend" / "swarm",
    ROOT / "gateway" / "server",
    ROOT / "gateway" / "host",
    Path(flower.__file__).parent / "catalogue",
    Path(flower.__file__).parent / "flows",
    Path(flower.__file__).parent / "starter",
]


@pytest.mark.parametrize(
    "module",
    [
        "flower_batch.gateway.server.__main__",
        "flower_batch.backend.swarm.task_signals",
        "flower_batch.running.image",
    ],
)
def test_the_modules_a_container_or_a_person_runs_with_python_m_exist(module: str) -> None:
    assert importlib.util.find_spec(module) is not None


def test_the_commands_that_start_them_name_those_paths() -> None:
    sidecar = (ROOT / "gateway" / "host" / "sidecar.py").read_text(encoding="utf-8")
    swarm = (ROOT / "backend" / "swarm" / "backend.py").read_text(encoding="utf-8")
    # (whitespace as the formatter lays the command list out)
    assert re.search(r'"-m",\s*"flower_batch\.gateway\.server",\s*"serve"', sidecar)
    assert '"flower_batch.backend.swarm.task_signals"' in swarm


@pytest.mark.parametrize("folder", SUBPACKAGES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_subpackage_docstring_names_its_modules(folder: Path) -> None:
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))) or ""
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__"}
    assert modules and {m for m in modules if m not in doc} == set()


def test_no_label_string_is_spelled_outside_labels_py() -> None:
    stray = [
        str(p.relative_to(ROOT))
        for p in ROOT.rglob("*.py")
        if p.name != "labels.py" and '"org.flower-batch.' in p.read_text(encoding="utf-8")
    ]
    assert stray == []
    names = [v for k, v in vars(labels).items() if k.isupper() and isinstance(v, str)]
    assert len(names) == len(set(names)) and all(n.startswith("org.flower-batch.") for n in names)


def test_a_lease_keeps_its_on_disk_names(tmp_path: Path) -> None:
    from flower_batch.running.lease import Lease, leases_dir

    with Lease(tmp_path) as lease:
        assert (tmp_path / ".sessions" / f"{lease.id}.lock").exists() and leases_dir(
            tmp_path
        ) == tmp_path / ".sessions"
        assert labels.labels("b", lease.id, "job")["org.flower-batch.session"] == lease.id
    assert not (tmp_path / ".sessions" / f"{lease.id}.lock").exists()


def test_the_migration_layer_and_the_fake_in_the_package_are_gone() -> None:
    for gone in (
        "flower_batch.matrix",
        "flower_batch.backend.fake",
        "flower_batch.gateway.host_modes",
        "flower_batch.running.session",
        "flower.flows.starter",
    ):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(gone)
    assert not list((REPO / "scripts").glob("rewrite_*_moves.py"))
