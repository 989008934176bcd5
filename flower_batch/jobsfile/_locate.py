"""Find the line of a key path in TOML source text.

tomllib returns plain dicts without positions, so error messages would have no line
numbers. This scanner walks the (already valid) text once and remembers where every
key, table header, array element and inline-table key starts. It only tracks structure;
values are never interpreted.
"""

from __future__ import annotations

from ._keypath import KeyPath

_BARE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class KeyLines:
    """Map of key path -> 1-based line number for one TOML document."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._lines: dict[KeyPath, int] = {}
        self._aot_counts: dict[KeyPath, int] = {}
        try:
            self._scan()
        except (IndexError, ValueError):
            pass  # best effort: a line number is a courtesy, never a reason to fail

    def line_of(self, path: KeyPath) -> int | None:
        """Line of `path`, else of its nearest recorded ancestor, else None."""
        for end in range(len(path), 0, -1):
            line = self._lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return None

    # --- scanning -------------------------------------------------------------------

    def _line_at(self, pos: int) -> int:
        return self._text.count("\n", 0, pos) + 1

    def _record(self, path: KeyPath, pos: int) -> None:
        line = self._line_at(pos)
        for end in range(1, len(path) + 1):
            self._lines.setdefault(tuple(path[:end]), line)

    def _scan(self) -> None:
        text, pos = self._text, 0
        table: KeyPath = ()
        while pos < len(text):
            pos = self._skip_space(pos, newlines=True)
            if pos >= len(text):
                break
            ch = text[pos]
            if ch == "#":
                pos = self._skip_comment(pos)
            elif text.startswith("[[", pos):
                keys, pos = self._parse_key(pos + 2)
                table = self._array_table_path(keys)
                self._record(table, pos)
                pos = self._skip_line(text.index("]]", pos) + 2)
            elif ch == "[":
                keys, pos = self._parse_key(pos + 1)
                table = self._resolve(keys)
                self._record(table, pos)
                pos = self._skip_line(text.index("]", pos) + 1)
            else:
                start = pos
                keys, pos = self._parse_key(pos)
                path = (*table, *keys)
                self._record(path, start)
                pos = self._skip_space(text.index("=", pos) + 1)
                pos = self._skip_value(pos, path)

    def _resolve(self, keys: tuple[str, ...]) -> KeyPath:
        # A header like [jobs.env] means "the env of the latest [[jobs]] element".
        out: KeyPath = ()
        for key in keys:
            out = (*out, key)
            if out in self._aot_counts:
                out = (*out, self._aot_counts[out])
        return out

    def _array_table_path(self, keys: tuple[str, ...]) -> KeyPath:
        parent = self._resolve(keys[:-1])
        base = (*parent, keys[-1])
        index = self._aot_counts.get(base, -1) + 1
        self._aot_counts[base] = index
        return (*base, index)

    def _parse_key(self, pos: int) -> tuple[tuple[str, ...], int]:
        text, keys = self._text, []
        while True:
            pos = self._skip_space(pos)
            if text[pos] in "\"'":
                key, pos = self._read_string(pos)
            else:
                end = pos
                while end < len(text) and text[end] in _BARE:
                    end += 1
                key, pos = text[pos:end], end
            keys.append(key)
            pos = self._skip_space(pos)
            if pos < len(text) and text[pos] == ".":
                pos += 1
                continue
            return tuple(keys), pos

    def _skip_value(self, pos: int, path: KeyPath) -> int:
        text = self._text
        ch = text[pos]
        if ch == "[":
            return self._skip_array(pos + 1, path)
        if ch == "{":
            return self._skip_inline_table(pos + 1, path)
        if ch in "\"'":
            return self._read_string(pos)[1]
        while pos < len(text) and text[pos] not in ",]}\n#":
            pos += 1
        return pos

    def _skip_array(self, pos: int, path: KeyPath) -> int:
        text, index = self._text, 0
        while True:
            pos = self._skip_blank(pos)
            if text[pos] == "]":
                return pos + 1
            self._record((*path, index), pos)
            pos = self._skip_value(pos, (*path, index))
            pos = self._skip_blank(pos)
            if text[pos] == ",":
                pos += 1
                index += 1

    def _skip_inline_table(self, pos: int, path: KeyPath) -> int:
        text = self._text
        while True:
            pos = self._skip_blank(pos)
            if text[pos] == "}":
                return pos + 1
            start = pos
            keys, pos = self._parse_key(pos)
            self._record((*path, *keys), start)
            pos = self._skip_space(text.index("=", pos) + 1)
            pos = self._skip_value(pos, (*path, *keys))
            pos = self._skip_blank(pos)
            if text[pos] == ",":
                pos += 1

    def _read_string(self, pos: int) -> tuple[str, int]:
        text = self._text
        quote = text[pos]
        if text.startswith(quote * 3, pos):
            end = text.index(quote * 3, pos + 3)
            while text.startswith(quote, end + 3):  # up to two quotes may end the string
                end += 1
            return text[pos + 3 : end], end + 3
        end = pos + 1
        while text[end] != quote:
            end += 2 if quote == '"' and text[end] == "\\" else 1
        raw = text[pos + 1 : end]
        return (
            raw.encode().decode("unicode_escape") if quote == '"' and "\\" in raw and raw.isascii() else raw
        ), end + 1

    def _skip_space(self, pos: int, newlines: bool = False) -> int:
        chars = " \t\r\n" if newlines else " \t"
        while pos < len(self._text) and self._text[pos] in chars:
            pos += 1
        return pos

    def _skip_blank(self, pos: int) -> int:
        # Inside arrays and (TOML 1.1-style) inline tables: whitespace, newlines, comments.
        while True:
            pos = self._skip_space(pos, newlines=True)
            if pos < len(self._text) and self._text[pos] == "#":
                pos = self._skip_comment(pos)
                continue
            return pos

    def _skip_comment(self, pos: int) -> int:
        end = self._text.find("\n", pos)
        return len(self._text) if end < 0 else end + 1

    def _skip_line(self, pos: int) -> int:
        return self._skip_comment(pos)
