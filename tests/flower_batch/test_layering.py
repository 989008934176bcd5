"""flower_batch's layers: no module imports another package's private module, no import cycle,
no import up the layers of docs/architecture.md, and the job model (flower_batch/jobmodel/) is a
bottom layer that layout and backend use without the reports. No module re-exports a name another
package defines. No test or bench reaches for a private name of flower, flower_batch or another
test module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import flower_batch
from tests.layering import Import, cycles, imports, private_uses, upward

ROOT = Path(flower_batch.__file__).parent
REPO = ROOT.parent
# Private names a test may still read, each with its reason.
PRIVATE_ALLOWED = {
    # The slow-disk test wraps the request log's writer to hold it back (a fault injected into the
    # server's own thread); nothing public would stand for it.
    "tests/flower/scripted/test_protocol.py uses flower.scripted.server.MessagesServer._write_one",
}
# docs/architecture.md, bottom to top. A module imports only from its own layer or those below.
LAYERS = {
    "foundation": [
        "flower_batch",
        "flower_batch.errors",
        "flower_batch.envnames",
        "flower_batch.workspace_diff",
        "flower_batch.untrusted_files",
        "flower_batch.workspace_scan",
        "flower_batch.outputlines",
        "flower_batch.labels",
    ],
    "job model": ["flower_batch.jobmodel"],
    "layout": ["flower_batch.layout"],
    "backend": ["flower_batch.backend"],
    "gateway": ["flower_batch.gateway"],
    "jobs file": ["flower_batch.jobsfile", "flower_batch.harbor"],
    "export": ["flower_batch.transcripts", "flower_batch.export"],
    "running": ["flower_batch.running"],
    "pre-flight": ["flower_batch.preflight"],
    "reports": ["flower_batch.reports", "flower_batch.compare", "flower_batch.view"],
    "command line": ["flower_batch.cli", "flower_batch.commands"],
}


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


def test_the_job_model_layout_and_backend_load_without_the_reports_or_the_jobs_file() -> None:
    code = (
        "import sys, flower_batch.jobmodel.record, flower_batch.jobmodel.classes, flower_batch.layout,"
        " flower_batch.backend.base\nprint(sorted(m for m in sys.modules if m.startswith("
        "('flower_batch.reports', 'flower_batch.jobsfile'))))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "[]"


def _loads(module: str, other: str) -> bool:
    code = f"import sys, {module}\nprint({other!r} in sys.modules)"
    return (
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "True"
    )


def test_parsing_a_jobs_file_loads_no_reports_and_reports_load_no_parser() -> None:
    assert not _loads("flower_batch.jobsfile", "flower_batch.reports")
    assert not _loads("flower_batch.reports", "flower_batch.jobsfile")
    assert _loads(
        "flower_batch.commands.matrix", "flower_batch.reports"
    )  # the check can see a loaded package


def test_no_module_re_exports_a_name_defined_elsewhere() -> None:
    """Every import goes to the module that defines the name: a package's __init__ may name the
    public API of its own private modules (jobsfile, reports), nothing else re-exports."""
    stray = []
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        exported = {
            elt.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            for elt in getattr(node.value, "elts", [])
            if isinstance(elt, ast.Constant)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            own_private = node.level == 1 and (node.module or "").startswith("_")
            for alias in node.names:
                if alias.asname is not None and alias.asname == alias.name:
                    stray.append(f"{path.relative_to(ROOT)} re-exports {alias.name} (`as` itself)")
                elif (alias.asname or alias.name) in exported and not own_private:
                    stray.append(f"{path.relative_to(ROOT)} re-exports {alias.name} from {node.module}")
    assert stray == []
    assert not (ROOT / "matrix").exists() and not (REPO / "docs" / "moves.md").exists()


def test_the_gateway_server_and_its_host_side_import_only_what_they_share() -> None:
    """gateway/server/ runs in the container, gateway/host/ on the host: neither imports the other;
    both use the shared contract at gateway/'s top (tokens, sockets, the files, auth)."""
    sides = ("flower_batch.gateway.server", "flower_batch.gateway.host")
    crossing = [
        f"{e.source}:{e.line} imports {e.target}"
        for e in imports(ROOT)
        for own, other in (sides, sides[::-1])
        if e.source.startswith(own + ".") or e.source == own
        if e.target.startswith(other + ".") or e.target == other
    ]
    assert crossing == []
    assert any(
        e.source.startswith(sides[0]) and e.target == "flower_batch.gateway.tokens" for e in imports(ROOT)
    )


def test_no_import_cycle() -> None:
    assert cycles(imports(ROOT)) == []


def test_no_module_imports_a_layer_above_its_own() -> None:
    assert upward(imports(ROOT), LAYERS) == []


def test_the_checks_see_a_cycle_and_an_upward_import() -> None:
    # The type-only cycle there was (supervisor typed its argument with sidecar's class), and the
    # job model reading a mode's label from the gateway: both must fail the tests above.
    edges = [
        Import("flower_batch.gateway.host.sidecar", 1, "flower_batch.gateway.host.supervisor"),
        Import("flower_batch.gateway.host.supervisor", 2, "flower_batch.gateway.host.sidecar"),
        Import("flower_batch.jobmodel.spec", 3, "flower_batch.gateway.host.setup"),
    ]
    assert cycles(edges) == [["flower_batch.gateway.host.sidecar", "flower_batch.gateway.host.supervisor"]]
    assert upward(edges, LAYERS) == [
        "flower_batch.jobmodel.spec:3 (job model) imports flower_batch.gateway.host.setup (gateway)"
    ]
    assert any(
        e.target == "flower_batch.jobmodel.modes"
        for e in imports(ROOT)
        if e.source == "flower_batch.jobmodel.spec"
    )  # imports() sees relative imports too


def test_no_test_or_bench_uses_a_private_name_of_the_packages() -> None:
    found = [
        use
        for top in ("tests", "bench")
        for path in sorted((REPO / top).rglob("*.py"))
        for use in private_uses(path.relative_to(REPO), ("flower", "flower_batch", "tests"))
    ]
    stray = [
        use for use in found if use.split(":")[0] + " uses " + use.split(" uses ")[1] not in PRIVATE_ALLOWED
    ]
    assert stray == []


def test_the_private_name_check_sees_each_way_in(tmp_path: Path) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import flower_batch.jobsfile._size\n"
        "import flower.scripted.server as server\n"
        "from flower_batch.reports._plots import pass_rate_svg\n"
        "from flower_batch.running.runner import _save_logs, public\n"
        "from tests.rig import _helper\n"  # not one of the packages asked about
        "server._LOG_QUEUE, server.MessagesServer._write_one, server.public, public._x\n"
        "def f(monkeypatch):\n    monkeypatch.setattr(server, '_LOG_QUEUE', 2)\n",  # a string: not seen
        encoding="utf-8",
    )
    assert private_uses(probe, ("flower", "flower_batch")) == [
        f"{probe}:{line} uses {name}"
        for line, name in [
            (1, "flower_batch.jobsfile._size"),
            (3, "flower_batch.reports._plots.pass_rate_svg"),
            (4, "flower_batch.running.runner._save_logs"),
            (6, "flower.scripted.server.MessagesServer._write_one"),
            (6, "flower.scripted.server._LOG_QUEUE"),
            (6, "flower_batch.running.runner.public._x"),
        ]
    ]
