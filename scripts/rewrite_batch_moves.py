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
RELATIVE = re.compile(r"^(?P<indent>[ \t]*)from (?P<dots>\.+)(?P<rest>[\w.]*) import (?P<names>\([^)]*\)|[^\n]*)",
                      re.M)


def tables() -> tuple[dict[str, str], dict[str, str]]:
    """(old module -> new module, old dotted name -> new dotted name) from docs/moves.md."""
    text = MOVES_DOC.read_text(encoding="utf-8").partition(SECTION)[2]
    modules_part, _, names_part = text.partition("## Names")
    return dict(ROW.findall(modules_part)), dict(ROW.findall(names_part))


def _package_of(path: Path) -> list[str]:
    try:
        parts = list(path.resolve().relative_to(REPO).with_suffix("").parts)
    except ValueError:
        return []
    return parts[:-1]


def absolute_imports(text: str, path: Path, modules: dict[str, str], names: dict[str, str]) -> str:
    """`from ._spec import` (in flower_batch/matrix/) -> `from flower_batch.matrix._spec import`,
    only where the module it names moved, or a name it imports did; other relative imports stay."""
    package = _package_of(path)
    moved_names: dict[str, set[str]] = {}
    for name in names:
        moved_names.setdefault(name.rpartition(".")[0], set()).add(name.rpartition(".")[2])

    def absolute(m: re.Match[str]) -> str:
        base = package[: len(package) - (len(m.group("dots")) - 1)]
        target = ".".join([*base, *([m.group("rest")] if m.group("rest") else [])])
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
    for path in map(Path, paths):
        old = path.read_text(encoding="utf-8")
        new = rewrite(old, path, modules, names)
        if new != old:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
