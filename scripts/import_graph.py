"""Regenerate the import graph in docs/architecture.md from the code (never drawn by hand).

    python scripts/import_graph.py           rewrite the section between the two markers
    python scripts/import_graph.py --check   exit 1 if the section is not what the code says

Every import counts (lazy ones inside functions and TYPE_CHECKING ones too). A node is a package's
subpackage or top-level module (`flower_batch.gateway`, `flower.flows`); a line lists what a node
imports of its own package, in the order of the package's layers as the graph finds them: each
node is listed after everything it imports (nodes in one cycle would be listed together, and the
layering tests forbid cycles).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
START = "<!-- import graph: scripts/import_graph.py writes this section; do not edit it by hand -->"
END = "<!-- end of import graph -->"
PACKAGES = ("flower", "flower_batch")


def _node(module: str) -> str:
    """The graph node a dotted module name belongs to: `pkg.sub` (or `pkg` for pkg/__init__)."""
    return ".".join(module.split(".")[:2])


def edges(package: str) -> dict[str, set[str]]:
    """node -> the other nodes of `package` it imports."""
    root = REPO / package
    graph: dict[str, set[str]] = {}
    modules = {
        ".".join([package, *p.relative_to(root).with_suffix("").parts]).removesuffix(".__init__")
        for p in root.rglob("*.py")
    }
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        is_init = parts[-1] == "__init__"
        if is_init:
            parts.pop()
        module = ".".join(parts)
        own = _node(module)
        graph.setdefault(own, set())
        here = parts if is_init else parts[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - node.level + 1]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod.
                targets = [
                    f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names
                ]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                if target.split(".")[0] == package and _node(target) != own:
                    graph[own].add(_node(target))
    return graph


def ordered(graph: dict[str, set[str]]) -> list[str]:
    """Bottom to top: each node after what it imports (ties by name)."""
    done: list[str] = []
    left = dict(graph)
    while left:
        ready = sorted(n for n, deps in left.items() if deps <= set(done))
        if not ready:  # a cycle: list the rest as they are (the layering tests fail on it)
            ready = sorted(left)
        done += ready
        for n in ready:
            left.pop(n)
    return done


def section() -> str:
    out = [START, ""]
    for package in PACKAGES:
        graph = edges(package)
        out += ["```", f"{package}, bottom to top: each line names what the node imports of {package}"]
        width = max(len(n) for n in graph)
        for node in ordered(graph):
            deps = ", ".join(d.split(".", 1)[1] if "." in d else d for d in sorted(graph[node]))
            out.append(f"{node.ljust(width)}  {deps or '-'}")
        out += ["```", ""]
    out.append(END)
    return "\n".join(out)


def main(argv: list[str]) -> int:
    text = DOC.read_text(encoding="utf-8")
    start, end = text.index(START), text.index(END) + len(END)
    new = text[:start] + section() + text[end:]
    if "--check" in argv:
        if new != text:
            print("docs/architecture.md: the import graph is out of date; run python scripts/import_graph.py")
            return 1
        return 0
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
