"""The import graph of a package, read from its source: which module imports which (every
import counts — lazy ones inside functions and TYPE_CHECKING ones too), its cycles, and the
imports that go up the package's layers. Used by tests/flower_batch/test_layering.py and
tests/flower/test_flower_layers.py, and (private_uses) the private names a test or bench file reaches for."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    line: int
    target: str  # the imported module (a package's __init__ is the package's name)


def _modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module under the package directory `root`."""
    found = {}
    for path in root.rglob("*.py"):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(root: Path) -> list[Import]:
    """Every import of a module of the package `root` by another of its modules."""
    modules = _modules(root)
    found = []
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = (
                    ".".join(
                        package[: len(package) - node.level + 1] + ([node.module] if node.module else [])
                    )
                    if node.level
                    else (node.module or "")
                )
                # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            found += [
                Import(name, node.lineno, t) for t in dict.fromkeys(targets) if t in modules and t != name
            ]
    return found


def cycles(edges: Sequence[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layer_of(module: str, layers: Mapping[str, Sequence[str]]) -> str:
    """The layer a module belongs to: the layer naming its longest dotted prefix (the package
    itself, a name without a dot, names only its own __init__)."""
    best, where = -1, ""
    for layer, prefixes in layers.items():
        for prefix in prefixes:
            inside = module.startswith(prefix + ".") and "." in prefix
            if (module == prefix or inside) and len(prefix) > best:
                best, where = len(prefix), layer
    if not where:
        raise AssertionError(f"{module} is in no layer: add it to the layer table (docs/architecture.md)")
    return where


def upward(edges: Sequence[Import], layers: Mapping[str, Sequence[str]]) -> list[str]:
    """`source:line (layer) imports target (higher layer)`, for every import up the layers
    (`layers` is ordered bottom to top)."""
    rank = {layer: i for i, layer in enumerate(layers)}
    found = []
    for edge in edges:
        mine, theirs = layer_of(edge.source, layers), layer_of(edge.target, layers)
        if rank[theirs] > rank[mine]:
            found.append(f"{edge.source}:{edge.line} ({mine}) imports {edge.target} ({theirs})")
    return found


def private_uses(path: Path, packages: Sequence[str]) -> list[str]:
    """`path:line uses name`, for every private name (a leading underscore, not a dunder) of the
    packages that the file reaches for: `from pkg.mod import _name`, a private module
    (`from pkg._mod import x`, `import pkg._mod`), or `mod._name` / `Class._name` read off a name
    it imported from them. A string (monkeypatch.setattr(obj, "_name", ...)) is not looked at."""

    def private(part: str) -> bool:
        return part.startswith("_") and not part.startswith("__")

    def ours(module: str) -> bool:
        return module.split(".")[0] in packages

    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound: dict[str, str] = {}  # a local name -> what it stands for, dotted
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level and ours(node.module):
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                bound[alias.asname or alias.name] = dotted
                if any(private(part) for part in dotted.split(".")):
                    found.append((node.lineno, dotted))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if ours(alias.name):
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        bound[top] = top
                    if any(private(part) for part in alias.name.split(".")):
                        found.append((node.lineno, alias.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            chain = [node.attr]
            base = node.value
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                found.append((node.lineno, ".".join([bound[base.id], *reversed(chain)])))
    return [f"{path}:{line} uses {name}" for line, name in sorted(set(found))]
