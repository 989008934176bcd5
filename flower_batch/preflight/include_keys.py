"""Did-you-mean warnings for `include` keys that name no axis.

GitHub Actions semantics stay: an include key that is not an axis is an extra key, and an
entry whose axis keys match nothing adds a combination of its own. So `{ varient = "v1" }`
silently adds a job instead of extending the `variant = "v1"` ones. Not an error (that would
break valid files); a warning on stderr with the axis it is probably a typo of.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..jobsfile import JOB_FIELDS, KeyLines, format_path


def include_warnings(path: Path, axes: Sequence[str], text: str | None = None) -> list[str]:
    """One `file:line: matrix.include[i].key: ...` line per include key that looks like a misspelt axis."""
    text = path.read_text(encoding="utf-8") if text is None else text
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []  # the loader has reported it already
    matrix = data.get("matrix")
    entries = matrix.get("include") if isinstance(matrix, Mapping) else None
    if not isinstance(entries, list):
        return []
    lines = KeyLines(text)
    out: list[str] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            continue
        for key in entry:
            if key in axes or key in JOB_FIELDS:
                continue
            guess = difflib.get_close_matches(key, axes, n=1, cutoff=0.6)
            if not guess:
                continue  # a new variable, as GitHub Actions allows
            where = ("matrix", "include", index, key)
            line = lines.line_of(where)
            at = f"{path.name}:{line}" if line else path.name
            out.append(
                f"{at}: {format_path(where)}: names no axis (did you mean `{guess[0]}`?); as in GitHub "
                "Actions it is kept as an extra key, so this entry may add a new combination"
            )
    return out
