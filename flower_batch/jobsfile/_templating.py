"""`${{ matrix.axis }}` templating (the GitHub Actions expression syntax, references only).

Supported references:
    ${{ matrix.NAME }}        an axis (or include-added) value; a table renders as its `name`
    ${{ matrix.NAME.KEY }}    one key of a table value
    ${{ task.name }}          the task's name
    ${{ job.id }}             the job id, e.g. fizzbuzz.careful.r2
    ${{ job.repeat }}         the repeat index, 1-based
No expressions, functions or escapes: `${{` always starts a reference.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flower_batch.errors import TemplateError

from ._keypath import KeyPath

_REFERENCE = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
_NAME = r"[A-Za-z_][A-Za-z0-9_-]*"
_VALID = re.compile(rf"^(matrix\.{_NAME}(\.{_NAME})?|task\.name|job\.id|job\.repeat)$")


@dataclass(frozen=True)
class Template:
    """A string from jobs.toml that may hold `${{ ... }}` references, with where it came from."""

    text: str
    path: KeyPath

    def references(self) -> list[str]:
        return [m.group(1).strip() for m in _REFERENCE.finditer(self.text)]

    def syntax_problem(self) -> str | None:
        """A one-line explanation if a reference is malformed, else None."""
        stripped = _REFERENCE.sub("", self.text)
        if "${{" in stripped:
            return "unclosed `${{`; close it with `}}`"
        for ref in self.references():
            if not _VALID.match(ref):
                return (
                    f"unknown reference `${{{{ {ref} }}}}`; use ${{{{ matrix.AXIS }}}}, "
                    "${{ matrix.AXIS.KEY }}, ${{ task.name }}, ${{ job.id }} or ${{ job.repeat }}"
                )
        return None

    def render(self, context: RenderContext) -> str:
        """The text with every reference replaced; raises TemplateError."""
        return _REFERENCE.sub(lambda m: context.lookup(m.group(1).strip()), self.text)


@dataclass(frozen=True)
class Literal(Template):
    """Text taken as written, never rendered: a Harbor task's instruction or path (its `${{` is
    the task's own text, not a reference)."""

    def references(self) -> list[str]:
        return []

    def syntax_problem(self) -> str | None:
        return None

    def render(self, context: RenderContext) -> str:
        return self.text


@dataclass(frozen=True)
class RenderContext:
    """What references resolve against for one job."""

    matrix: Mapping[str, Any]
    task: str
    job_id: str
    repeat: int

    def lookup(self, ref: str) -> str:
        if ref == "task.name":
            return self.task
        if ref == "job.id":
            return self.job_id
        if ref == "job.repeat":
            return str(self.repeat)
        _, name, *key = ref.split(".")
        if name not in self.matrix:
            known = ", ".join(sorted(self.matrix)) or "none"
            raise TemplateError(
                f"`${{{{ {ref} }}}}` is not defined for job {self.job_id} (its matrix values: {known}); "
                f"add a `{name}` axis or an include entry that sets it",
                ref,
            )
        value = self.matrix[name]
        if key:
            if not isinstance(value, Mapping) or key[0] not in value:
                raise TemplateError(
                    f"`${{{{ {ref} }}}}`: matrix.{name} has no key `{key[0]}` in job {self.job_id}", ref
                )
            value = value[key[0]]
        return scalar_text(value, ref)


def scalar_text(value: Any, ref: str) -> str:
    """How a matrix value is written into a string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, Mapping) and isinstance(value.get("name"), str):
        return str(value["name"])
    raise TemplateError(f"`${{{{ {ref} }}}}` is a table without a `name`; use ${{{{ {ref}.KEY }}}}", ref)
