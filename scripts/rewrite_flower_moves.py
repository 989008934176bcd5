"""Rewrite imports of flower's moved modules and renamed names in the given files, in place.

The table is docs/moves.md (the one source); each file is rewritten in one pass, so running
it twice changes nothing more. Usage: python3 scripts/rewrite_flower_moves.py FILE...
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

MOVES_DOC = Path(__file__).resolve().parent.parent / "docs" / "moves.md"
ROW = re.compile(r"^\| `([\w.]+)` \| `([\w.]+)` \|", re.M)


def tables() -> tuple[dict[str, str], dict[str, str]]:
    """(old module -> new module, old dotted name -> new dotted name) from docs/moves.md."""
    text = MOVES_DOC.read_text(encoding="utf-8").partition("\n# Moves: flower_batch")[0]  # flower's part only
    modules_part, _, names_part = text.partition("## Names")
    return dict(ROW.findall(modules_part)), dict(ROW.findall(names_part))


IMPORT = re.compile(r"^(?P<indent>[ \t]*)from (?P<mod>flower[\w.]*) import (?P<names>\([^)]*\)|[^\n]*)", re.M)


def rewrite(text: str, modules: dict[str, str], names: dict[str, str]) -> str:
    """Old modules first (one pass, longest first), then names moved out of their module."""
    if modules:
        new_modules = {*modules.values(), *(name.rpartition(".")[0] for name in names.values()), *_layout()}
        leaves = "|".join(sorted({module.rpartition(".")[2] for module in new_modules}))
        # not followed by a new module's leaf: a path already rewritten stays as it is
        old = re.compile(r"\b(" + "|".join(re.escape(k) for k in sorted(modules, key=len, reverse=True))
                         + rf")\b(?!\.(?:{leaves})\b)")
        submodules = {module for module in new_modules if module.count(".") == 2}  # flower.<pkg>.<leaf>
        text = "\n".join(line if _imports_submodules(line, submodules) else old.sub(lambda m: modules[m.group(1)], line)
                         for line in text.split("\n"))
        for module, new in modules.items():  # `from flower import signals` -> `from flower.runtime import signals`
            pkg, _, leaf = new.rpartition(".")
            if pkg != "flower":
                text = re.sub(rf"^(\s*)from flower import {module.rpartition('.')[2]}$", rf"\1from {pkg} import {leaf}",
                              text, flags=re.M)
    by_module: dict[str, dict[str, str]] = {}
    for old_name, new_name in names.items():
        by_module.setdefault(old_name.rpartition(".")[0], {})[old_name.rpartition(".")[2]] = new_name
    return IMPORT.sub(lambda m: _split_import(m, by_module), text)


def _layout() -> set[str]:
    """Every module of the new layout (`flower.<pkg>.<module>`), read from this repository's flower/."""
    root = MOVES_DOC.parent.parent / "flower"
    return {f"flower.{path.parent.name}.{path.stem}" for path in root.glob("*/*.py") if path.stem != "__init__"}


def _imports_submodules(line: str, submodules: set[str]) -> bool:
    """`from flower.cli import terminal`: already the new layout (a package's submodule)."""
    m = re.match(r"\s*from (flower\.\w+) import ([\w, ]+)$", line)
    if m is None:
        return False
    return all(f"{m.group(1)}.{name.strip().split(' as ')[0]}" in submodules
                           for name in m.group(2).split(","))


def _split_import(m: re.Match[str], by_module: dict[str, dict[str, str]]) -> str:
    """`from M import a, b` where `a` moved to N as `c`: `from N import c as a` + `from M import b`."""
    moved = by_module.get(m.group("mod"))
    if not moved:
        return m.group(0)
    raw, _, comment = m.group("names").strip("()").partition("#")
    keep: list[str] = []
    elsewhere: dict[str, list[str]] = {}
    for item in (x.strip() for x in raw.replace("\n", " ").split(",") if x.strip()):
        name, _, alias = item.partition(" as ")
        if name not in moved:
            keep.append(item)
            continue
        new_module, _, new_name = moved[name].rpartition(".")
        bound = alias or name
        elsewhere.setdefault(new_module, []).append(new_name if new_name == bound else f"{new_name} as {bound}")
    if not elsewhere:
        return m.group(0)
    indent = m.group("indent")
    lines = [f"{indent}from {module} import {', '.join(items)}" for module, items in elsewhere.items()]
    if keep:
        lines.append(f"{indent}from {m.group('mod')} import {', '.join(keep)}")
    return "\n".join(lines) + (f"  #{comment}" if comment else "")


def main(paths: list[str]) -> None:
    modules, names = tables()
    for path in map(Path, paths):
        old = path.read_text(encoding="utf-8")
        new = rewrite(old, modules, names)
        if new != old:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
