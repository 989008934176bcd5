"""Key paths into a jobs.toml (`matrix.include[2].task`), as its problems name them.

Every problem is one `FieldError` (file, line, field, message-with-the-fix); the loader
collects all of them and raises a single `MatrixFileError` so nothing runs until the
whole file is valid. Both live in flower_batch/errors.py with the rest of the error tree.
"""

from __future__ import annotations

KeyPath = tuple[str | int, ...]


def format_path(path: KeyPath) -> str:
    """`("matrix", "include", 2, "task")` -> `matrix.include[2].task`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _is_bare(part):
            out += f".{part}" if out else part
        else:
            out += f'."{part}"' if out else f'"{part}"'
    return out


def _is_bare(key: str) -> bool:
    return bool(key) and all(c.isalnum() or c in "_-" for c in key) and key.isascii()
