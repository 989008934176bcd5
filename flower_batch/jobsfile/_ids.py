"""Readable, stable labels and job ids built from matrix values.

A job id is `<task>.<label>...<label>.r<repeat>`, e.g. `fizzbuzz.careful.r1`: the task,
then one label per identifying axis in declaration order, then the repeat. Labels:
    string         slug of the string              "Claude Sonnet" -> claude-sonnet
    number         axis and value                  temperature 0.2 -> temperature-0-2
    boolean        axis, or no-axis                 verbose false  -> no-verbose
    table          slug of its `name`, else of its values joined with "-"
Ids only use [a-z0-9_-] and dots, so they are safe as folder and container names.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

MAX_LABEL = 40
_NOT_SLUG = re.compile(r"[^a-z0-9_]+")


def slugify(text: str) -> str:
    return _NOT_SLUG.sub("-", text.lower()).strip("-_")


def value_label(axis: str, value: Any) -> str:
    """The id label of one matrix value."""
    if isinstance(value, bool):
        label = slugify(axis) if value else f"no-{slugify(axis)}"
    elif isinstance(value, int | float):
        label = slugify(f"{axis}-{value}")
    elif isinstance(value, str):
        label = slugify(value)
    elif isinstance(value, Mapping):
        name = value.get("name")
        if isinstance(name, str):
            label = slugify(name)
        else:
            label = slugify("-".join(str(v) for v in value.values() if isinstance(v, str | int | float)))
    else:
        label = ""
    return _bounded(label or slugify(axis) or "value", repr(value))


def _bounded(label: str, identity: str) -> str:
    # Long values (a whole prompt as an axis) get a short, still unique, label.
    if len(label) <= MAX_LABEL:
        return label
    digest = hashlib.sha256(identity.encode()).hexdigest()[:6]
    return f"{label[: MAX_LABEL - 7].rstrip('-_')}-{digest}"


def job_id(task: str, labels: list[str], repeat: int) -> str:
    return ".".join([slugify(task), *labels, f"r{repeat}"])


def variant_of(labels: list[str]) -> str:
    """The comparison column a job belongs to: its labels without task and repeat."""
    return ".".join(labels) if labels else "default"
