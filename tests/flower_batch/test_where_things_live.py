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
    swarm = (ROOT / "backend" / "swarm" / "service_spec.py").read_text(encoding="utf-8")  # what create runs
    # (whitespace as the formatter lays the command list out)
    assert re.search(r'"-m",\s*"flower_batch\.gateway\.server",\s*"serve"', sidecar)
    assert '"flower_batch.backend.swarm.task_signals"' in swarm


@pytest.mark.parametrize("folder", SUBPACKAGES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_subpackage_docstring_names_its_modules(folder: Path) -> None:
    doc = _docstring(folder)
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__"}
    assert modules and {m for m in modules if m not in doc} == set()


PACKAGES = sorted(p.parent for p in ROOT.rglob("__init__.py") if "__pycache__" not in p.parts)
# A row of a docstring's table of modules: `name`, `name.py` or `name/` at most four spaces in,
# then two spaces or more before what it is.
TABLE_ROW = re.compile(r"^ {0,4}([A-Za-z_]\w*)(?:\.py|/)? {2,}\S", re.MULTILINE)
BARE_FILE = re.compile(r"(?<![\w/.-])([A-Za-z_]\w*)\.py\b")  # `name.py`: a module of this folder
REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:flower_batch|flower|tests|docs|schemas|bench|examples|scripts)/[\w./-]*\w/?)"
)
DOTTED = re.compile(r"(?<![\w.])(flower_batch(?:\.\w+)+)")


def _docstring(folder: Path) -> str:
    return ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))) or ""


def _parts(folder: Path) -> set[str]:
    """The modules and subpackages of a package folder."""
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__"}
    return modules | {d.name for d in folder.iterdir() if (d / "__init__.py").is_file()}


def _resolves(dotted: str) -> bool:
    """A module, or a name in one (`flower_batch.cli.main`)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


@pytest.mark.parametrize("folder", PACKAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_package_docstring_names_each_public_module_and_subpackage(folder: Path) -> None:
    # A private module (_parse.py) is the package's own business: its docstring names the public API.
    doc = _docstring(folder)
    public = {m for m in _parts(folder) if not m.startswith("_")}
    assert {m for m in public if not re.search(rf"(?<![\w-]){m}(?!\w)", doc)} == set()


@pytest.mark.parametrize("folder", PACKAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_package_docstring_names_a_module_or_path_that_does_not_exist(folder: Path) -> None:
    doc = _docstring(folder)
    parts = _parts(folder)
    named = set(TABLE_ROW.findall(doc)) | set(BARE_FILE.findall(doc))
    assert named - parts == set(), f"{folder.relative_to(REPO)}/__init__.py names no such module"
    assert [p for p in REPO_PATH.findall(doc) if not (REPO / p).exists()] == []
    assert [d for d in DOTTED.findall(doc) if not _resolves(d)] == []


def test_the_docstring_checks_catch_a_module_that_is_not_there() -> None:
    # running/__init__.py once listed `session` (the lease's old name) years after it moved.
    assert TABLE_ROW.findall("Running.\n\n    session      the lock\n    lease.py     the lock\n") == [
        "session",
        "lease",
    ]
    assert BARE_FILE.findall("see gone.py, not flower_batch/errors.py") == ["gone"]
    assert REPO_PATH.findall("flower_batch/nowhere/ and docs/export.md.") == [
        "flower_batch/nowhere/",
        "docs/export.md",
    ]
    assert not _resolves("flower_batch.running.session") and _resolves("flower_batch.cli.main")


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
