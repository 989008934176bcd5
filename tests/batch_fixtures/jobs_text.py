"""A jobs.toml text of one task and a matrix of the given axes, for the parser's, pre-flight's and
the dry-run summary's tests."""

from __future__ import annotations

import json
from collections.abc import Sequence


def jobs_text(
    axes: dict[str, list[int]], include: Sequence[dict] = (), exclude: Sequence[dict] = (), repeat: int = 1
) -> str:
    def inline(d: dict) -> str:
        return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in d.items()) + " }"

    lines = ["[tasks.t]", 'prompt = "p"', "[matrix]", f"repeat = {repeat}"]
    lines += [f"{name} = {json.dumps(values)}" for name, values in axes.items()]
    if include:
        lines.append(f"include = [{', '.join(inline(e) for e in include)}]")
    if exclude:
        lines.append(f"exclude = [{', '.join(inline(e) for e in exclude)}]")
    return "\n".join(lines) + "\n"
