"""Errors raised while reading a jobs.toml.

Every problem is one `FieldError` (file, line, field, message-with-the-fix); the loader
collects all of them and raises a single `MatrixFileError` so nothing runs until the
whole file is valid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flower_batch.errors import FlowerBatchError

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


@dataclass(frozen=True)
class FieldError:
    """One problem in a jobs.toml, printed as `file:line: field: message`."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        line = f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        return one_line(line)


def one_line(text: str) -> str:
    """Control characters (a newline in a value or key the file holds) shown escaped: one problem,
    one line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class MatrixFileError(FlowerBatchError, ValueError):
    """A jobs.toml is invalid; `errors` holds every problem found, one line each."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))
