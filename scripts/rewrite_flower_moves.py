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
    text = MOVES_DOC.read_text(encoding="utf-8")
    modules_part, _, names_part = text.partition("## Names")
    return dict(ROW.findall(modules_part)), dict(ROW.findall(names_part))


def rewrite(text: str, modules: dict[str, str], names: dict[str, str]) -> str:
    """One pass over `text`: old names first (they are longer), then old modules."""
    table = {**modules, **names}
    if not table:
        return text
    pattern = re.compile(r"\b(" + "|".join(re.escape(k) for k in sorted(table, key=len, reverse=True)) + r")\b")
    text = pattern.sub(lambda m: table[m.group(1)], text)
    # `from flower.pkg.mod import Old` where only the name was renamed
    for old, new in names.items():
        old_mod, _, old_leaf = old.rpartition(".")
        new_mod, _, new_leaf = new.rpartition(".")
        text = re.sub(rf"(from {re.escape(new_mod)} import [^\n]*?)\b{old_leaf}\b", rf"\g<1>{new_leaf}", text)
    for old, new in modules.items():  # `from flower import signals` -> `from flower.runtime import signals`
        pkg, _, leaf = new.rpartition(".")
        old_leaf = old.rpartition(".")[2]
        if pkg != "flower":
            text = re.sub(rf"^(\s*)from flower import {old_leaf}$", rf"\1from {pkg} import {leaf}", text, flags=re.M)
    return text


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
