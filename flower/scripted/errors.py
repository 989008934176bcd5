"""The one error a user sees when a scenario is wrong: file, rule, field and how to fix it."""

from __future__ import annotations


class ScenarioError(ValueError):
    """A scenario file or dict is invalid. `str(err)` is one line naming file, rule and field."""

    def __init__(self, message: str, *, source: str = "", rule: str | None = None, field: str | None = None):
        super().__init__(message)
        self.source = source
        self.rule = rule
        self.field = field
