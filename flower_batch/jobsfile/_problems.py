"""Collects every problem in a jobs.toml before anything runs."""

from __future__ import annotations

from collections.abc import Hashable

from flower_batch.errors import FieldError, MatrixFileError

from ._keypath import KeyPath, format_path
from ._locate import KeyLines


class Problems:
    """One `FieldError` per distinct problem, each with the line of the offending key."""

    def __init__(self, file: str, lines: KeyLines) -> None:
        self._file = file
        self._lines = lines
        self._seen: dict[Hashable, FieldError] = {}

    def add(self, path: KeyPath, message: str, key: Hashable = None) -> None:
        """Record a problem; the same `key` (default: path + message) is reported once."""
        dedupe = (path, key if key is not None else message)
        if dedupe not in self._seen:
            error = FieldError(self._file, self._lines.line_of(path), format_path(path), message)
            self._seen[dedupe] = error

    def __len__(self) -> int:
        return len(self._seen)

    def errors(self) -> list[FieldError]:
        # File order, so fixing top to bottom works; problems without a line go last.
        return sorted(self._seen.values(), key=lambda e: (e.line is None, e.line or 0))

    def raise_if_any(self) -> None:
        if self._seen:
            raise MatrixFileError(self.errors())
