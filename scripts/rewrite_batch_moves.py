"""Rewrite imports of flower_batch's moved modules and error classes in the given files, in place.

The table is the "flower_batch" part of docs/moves.md (the one source). Relative imports that
name a moved module become absolute (`from ._spec import JobSpec` in flower_batch/matrix/ ->
`from flower_batch.jobmodel.spec import JobSpec`); imports of a moved name are split as
scripts/rewrite_flower_moves.py does. Running it twice changes nothing more.
Usage: python3 scripts/rewrite_batch_moves.py FILE...
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rewrite_flower_moves import IMPORT, MOVES_DOC, ROW, _split_import  # noqa: E402

REPO = MOVES_DOC.parent.parent
SECTION = "\n# Moves: flower_batch"
SECTIONS = re.compile(r"\n## ([^\n]+)\n(.*?)(?=\n## |\n# |\Z)", re.S)
SELF = {Path(__file__).resolve(), Path(__file__).resolve().parent / "rewrite_flower_moves.py"}  # their examples stay
RELATIVE = re.compile(r"^(?P<indent>[ \t]*)from (?P<dots>\.+)(?P<rest>[\w.]*) import (?P<names>\([^)]*\)|[^\n]*)",
                      re.M)


def tables() -> tuple[dict[str, str], dict[str, str]]:
    """(old module -> new module, old dotted name -> new dotted name) from docs/moves.md.

    Modules come from its "## Modules" and "## Test modules" tables, names from "## Names". A
    name's new module may itself have moved since (`flower_batch.cmd_common.run_async` ->
    `flower_batch.commands.common.run_async`), and a moved module is also a moved name of its
    package (`from flower_batch import runner` -> `from flower_batch.running import runner`)."""
    text = MOVES_DOC.read_text(encoding="utf-8").partition(SECTION)[2]
    sections = dict(SECTIONS.findall("\n" + text))
    modules: dict[str, str] = {}
    for heading in ("Modules", "Test modules"):
        modules.update(ROW.findall(sections.get(heading, "")))
    names = {old: _moved(new, modules) for old, new in ROW.findall(sections.get("Names", ""))}
    for old, new in modules.items():
        names.setdefault(old, new)
    return modules, names


def _moved(dotted: str, modules: dict[str, str]) -> str:
    """`pkg.mod.name` with `pkg.mod` read through the module table."""
    module, _, name = dotted.rpartition(".")
    return f"{modules.get(module, module)}.{name}"


def _dotted(path: Path) -> list[str]:
    try:
        return list(path.resolve().relative_to(REPO).with_suffix("").parts)
    except ValueError:
        return []


def _exists(module: str) -> bool:
    where = REPO.joinpath(*module.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def _resolve(package: list[str], dots: str, rest: str) -> str:
    base = package[: len(package) - (len(dots) - 1)]
    return ".".join([*base, *([rest] if rest else [])])


def absolute_imports(text: str, path: Path, modules: dict[str, str], names: dict[str, str]) -> str:
    """`from ._spec import` (in flower_batch/matrix/) -> `from flower_batch.matrix._spec import`,
    only where the module it names moved, or a name it imports did; other relative imports stay.

    A module that moved out of the package root (flower_batch/commands/matrix.py, once
    flower_batch/matrix_cmd.py) may still hold imports relative to where it was (`from .matrix
    import`, merged from a branch that edited the old file): one that names a module at the old
    place, or one that moved from there, is read from the old place and made absolute (so the
    moved packages use absolute imports); one that names nothing there (`from ..errors import`)
    is taken as written."""
    dotted = _dotted(path)
    package = dotted[:-1]
    moved_from = {new: old for old, new in modules.items()}.get(".".join(dotted))
    # only the modules that left the package root: the earlier moves out of matrix/ were rewritten then
    old_package = ["flower_batch"] if moved_from and moved_from.count(".") == 1 else None
    moved_names: dict[str, set[str]] = {}
    for name in names:
        moved_names.setdefault(name.rpartition(".")[0], set()).add(name.rpartition(".")[2])

    def absolute(m: re.Match[str]) -> str:
        if old_package is not None:
            there = _resolve(old_package, m.group("dots"), m.group("rest"))
            if there.startswith("flower_batch") and (_exists(there) or there in modules):
                return f"{m.group('indent')}from {there} import {m.group('names')}"
        target = _resolve(package, m.group("dots"), m.group("rest"))
        imported = {item.strip().split(" as ")[0] for item in
                    m.group("names").strip("()").partition("#")[0].replace("\n", " ").split(",")}
        if target in modules or imported & moved_names.get(target, set()):
            return f"{m.group('indent')}from {target} import {m.group('names')}"
        return m.group(0)

    return RELATIVE.sub(absolute, text) if package else text


def rewrite(text: str, path: Path, modules: dict[str, str], names: dict[str, str]) -> str:
    text = absolute_imports(text, path, modules, names)
    if modules:
        old = re.compile(r"\b(" + "|".join(re.escape(k) for k in sorted(modules, key=len, reverse=True)) + r")\b")
        text = old.sub(lambda m: modules[m.group(1)], text)
    by_module: dict[str, dict[str, str]] = {}
    for old_name, new_name in names.items():
        module, _, name = old_name.rpartition(".")
        for where in {module, modules.get(module, module)}:  # the module may have moved too
            by_module.setdefault(where, {})[name] = new_name
    return IMPORT.sub(lambda m: _split_import(m, by_module), text)


def main(paths: list[str]) -> None:
    modules, names = tables()
    for path in (p for p in map(Path, paths) if p.resolve() not in SELF):
        old = path.read_text(encoding="utf-8")
        new = rewrite(old, path, modules, names)
        if new != old:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
