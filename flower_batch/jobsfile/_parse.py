"""jobs.toml document -> `Parsed` (validated sections, not yet expanded into jobs).

Every check reports into `Problems` and carries on, so one pass finds all errors.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flower_batch.harbor.taskset import select, unmatched

from ._fields import JOB_FIELDS, Overlay, close_field, is_invalid, parse_field, parse_overlay, show_value
from ._ids import value_label
from ._keypath import KeyPath
from ._problems import Problems
from ._tasksets import HarborSource, Narrowing, parse_tasksets

SECTIONS = ("batch", "defaults", "tasks", "tasksets", "matrix", "jobs")
_TASK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_AXIS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_BATCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_MATRIX_KEYS = ("include", "exclude", "repeat")
MAX_REPEAT = 1000


@dataclass
class Val:
    """One matrix value: the raw TOML value, its id label and the job fields it sets."""

    raw: Any
    label: str
    path: KeyPath
    overlay: Overlay = field(default_factory=dict)


@dataclass
class Explicit:
    """One [[jobs]] entry."""

    name: str
    task: str
    variables: dict[str, Any]
    overlay: Overlay
    repeat: int
    path: KeyPath


@dataclass
class Parsed:
    batch_name: str | None = None
    budget_usd: float | None = None
    backend: str | None = None
    image: str | None = None
    defaults: Overlay = field(default_factory=dict)
    tasks: dict[str, Overlay] = field(default_factory=dict)
    descriptions: dict[str, str] = field(default_factory=dict)
    axes: dict[str, list[Val]] = field(default_factory=dict)
    include: list[dict[str, Val]] = field(default_factory=list)
    exclude: list[dict[str, Val]] = field(default_factory=list)
    repeat: int = 1
    explicit: list[Explicit] = field(default_factory=list)
    harbor: dict[str, HarborSource] = field(default_factory=dict)
    """The tasks of [tasksets.NAME] sections, by name (their section's fields are in `tasks`)."""
    dropped: set[str] = field(default_factory=set)
    """Task names `-i`/`-x` left out: a matrix value naming one is passed over, not a mistake."""


def match(filter_value: Val, value: Val) -> bool:
    """Include/exclude matching: equal, a partial table, or a table named by its `name`."""
    a, b = filter_value.raw, value.raw
    if a == b:
        return True
    if isinstance(b, Mapping):
        if isinstance(a, Mapping):
            return all(k in b and b[k] == v for k, v in a.items())
        return isinstance(a, str) and b.get("name") == a
    return False


class Parser:
    def __init__(self, problems: Problems, base_dir: Path, narrowing: Narrowing | None = None) -> None:
        self.problems = problems
        self.base_dir = base_dir
        self.narrowing = narrowing or Narrowing()
        self.out = Parsed()
        self._all_names: list[str] = []

    def report(self, path: KeyPath, message: str) -> None:
        self.problems.add(path, message)

    def parse(self, data: Mapping[str, Any]) -> Parsed:
        for key in data:
            if key not in SECTIONS:
                self.report(
                    (key,),
                    _unknown(
                        "section",
                        key,
                        SECTIONS,
                        "[batch], [defaults], [tasks.NAME], [tasksets.NAME], [matrix] or [[jobs]]",
                    ),
                )
        self._batch(self._table(data, "batch"))
        self._defaults(self._table(data, "defaults"))
        self._tasks(self._table(data, "tasks"), has_tasksets=bool(data.get("tasksets")))
        self._tasksets(self._table(data, "tasksets"))
        self._narrow()
        self._matrix(self._table(data, "matrix"))
        self._jobs(data.get("jobs", []))
        return self.out

    def _table(self, data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, Mapping):
            self.report((key,), f"expected a table [{key}], got {show_value(value)}")
            return {}
        return value

    # --- [batch] ---------------------------------------------------------------------

    def _batch(self, table: Mapping[str, Any]) -> None:
        for key, value in table.items():
            path: KeyPath = ("batch", key)
            if key == "name":
                if isinstance(value, str) and _BATCH_NAME.match(value):
                    self.out.batch_name = value
                else:
                    self.report(
                        path, f"expected a folder-safe name (letters, digits, . _ -), got {show_value(value)}"
                    )
            elif key == "budget_usd":
                budget = parse_field("budget_usd", value, path, self.report)
                self.out.budget_usd = budget if isinstance(budget, float) else None
            elif key == "backend":
                if value in ("docker", "swarm"):
                    self.out.backend = value
                else:
                    self.report(path, f'expected "docker" or "swarm", got {show_value(value)}')
            else:
                self.report(path, _unknown("key in [batch]", key, ("name", "budget_usd", "backend")))

    # --- [defaults] and [tasks.NAME] ---------------------------------------------------

    def _defaults(self, table: Mapping[str, Any]) -> None:
        self._check_keys(table, ("defaults",), JOB_FIELDS)
        image = table.get("image")
        if isinstance(image, str) and image.strip():  # also the runtime, when it is one (matrix)
            self.out.image = image.strip()
        self.out.defaults = parse_overlay(table, ("defaults",), self.report)

    def _tasks(self, table: Mapping[str, Any], *, has_tasksets: bool = False) -> None:
        if not table and not has_tasksets:
            self.report(
                ("tasks",),
                "no tasks defined; add a [tasks.NAME] table with a prompt and a workspace "
                '(or a [tasksets.NAME] with harbor = "path")',
            )
        for name, task in table.items():
            path: KeyPath = ("tasks", name)
            if not _TASK_NAME.match(name):
                self.report(path, "task names may use letters, digits, - and _ only (they become job ids)")
                continue
            if not isinstance(task, Mapping):
                self.report(path, f"expected a table [tasks.{name}], got {show_value(task)}")
                continue
            self._check_keys(task, path, (*JOB_FIELDS, "description"))
            if "description" in task:
                if isinstance(task["description"], str):
                    self.out.descriptions[name] = task["description"]
                else:
                    self.report(
                        (*path, "description"), f"expected a string, got {show_value(task['description'])}"
                    )
            self.out.tasks[name] = parse_overlay(task, path, self.report)

    def _tasksets(self, table: Mapping[str, Any]) -> None:
        found = parse_tasksets(table, self.base_dir, self.report, self.narrowing)
        for name in found.names:
            if name in self.out.tasks:
                self.report(
                    ("tasksets", found.names[name], "harbor"),
                    f'task "{name}" is also a [tasks.{name}]; rename one (task names make job ids)',
                )
        for name, source in found.sources.items():
            if name in self.out.tasks:
                continue
            self.out.harbor[name] = source
            self.out.tasks[name] = found.overlays[name]
            if source.task.description:
                self.out.descriptions[name] = source.task.description
        self._all_names = [*self.out.tasks, *(n for n in found.names if n not in self.out.tasks)]

    def _narrow(self) -> None:
        """`-i`/`-x` on every task's name; a glob that selects nothing is a mistake worth a line."""
        if not self.narrowing:
            return
        names = self._all_names
        for flag, globs in (("-i", self.narrowing.include), ("-x", self.narrowing.exclude)):
            for glob in unmatched(names, globs):
                self.report((), f'{flag} "{glob}" selects no task ({len(names)} in the file); fix the glob')
        kept = set(select(list(self.out.tasks), self.narrowing.include, self.narrowing.exclude))
        self.out.dropped = {n for n in names if n not in kept}
        self.out.tasks = {n: o for n, o in self.out.tasks.items() if n in kept}
        if names and not kept and not self.problems:
            self.report((), "-i/-x leave no task to run; widen them")

    def _check_keys(self, table: Mapping[str, Any], path: KeyPath, allowed: tuple[str, ...]) -> None:
        for key in table:
            if key in allowed:
                continue
            where = (*path, key)
            if key == "task":
                self.report(
                    where,
                    'the starter flow takes `prompt` as its task text; write prompt = "..." and leave out `workflow`',
                )
            elif key == "repeat":
                self.report(where, "repeat is set once, in [matrix] (or per [[jobs]] entry)")
            else:
                self.report(where, _unknown("field", key, allowed))

    # --- [matrix] ----------------------------------------------------------------------

    def _matrix(self, table: Mapping[str, Any]) -> None:
        self._repeat(table)
        for axis, values in table.items():
            if axis in _MATRIX_KEYS:
                continue
            self._axis(axis, values)
        if "task" not in self.out.axes:
            # Undeclared task axis = every task, outermost, so include/exclude can name it.
            implied = [Val(name, value_label("task", name), ("tasks", name)) for name in self.out.tasks]
            self.out.axes = {"task": implied, **self.out.axes}
        self._include(table.get("include", []))
        self._exclude(table.get("exclude", []))

    def _repeat(self, table: Mapping[str, Any]) -> None:
        if "repeat" not in table:
            return
        repeat = table["repeat"]
        if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= MAX_REPEAT:
            self.report(
                ("matrix", "repeat"),
                f"expected a whole number of runs per combination from 1 to {MAX_REPEAT}, got {show_value(repeat)}",
            )
        else:
            self.out.repeat = repeat

    def _axis(self, axis: str, values: Any) -> None:
        path: KeyPath = ("matrix", axis)
        if not _AXIS_NAME.match(axis):
            self.report(
                path,
                "axis names may use letters, digits, - and _, starting with a letter (they are used as ${{ matrix.NAME }})",
            )
            return
        if not isinstance(values, list) or not values:
            got = "an empty list" if values == [] else show_value(values)
            self.report(path, f'an axis is a non-empty list of values, e.g. {axis} = ["a", "b"]; got {got}')
            return
        vals: list[Val] = []
        for index, raw in enumerate(values):
            val = self._value(axis, raw, (*path, index))
            if val is None:
                continue
            twin = next((v for v in vals if v.raw == raw or v.label == val.label), None)
            if twin is not None:
                what = "the same value as" if twin.raw == raw else f'the same id label "{val.label}" as'
                self.report(
                    val.path,
                    f"has {what} {axis}[{twin.path[-1]}]; make each value distinct (tables: give each a distinct `name`)",
                )
                continue
            vals.append(val)
        self.out.axes[axis] = vals

    def _value(self, key: str, raw: Any, path: KeyPath) -> Val | None:
        """Parse a value given to matrix key `key` (axis value or include entry value)."""
        if key == "task":
            if isinstance(raw, str) and raw in self.out.dropped:  # left out by -i/-x: no mistake
                return None
            if not isinstance(raw, str) or raw not in self.out.tasks:  # a list or table is no task name
                known = ", ".join(self.out.tasks) or "none defined"
                self.report(
                    path, f"unknown task {show_value(raw)}; define [tasks.{raw}] or use one of: {known}"
                )
                return None
            return Val(raw, value_label("task", raw), path)
        if key in JOB_FIELDS:
            parsed = parse_field(key, raw, path, self.report)
            if is_invalid(parsed):
                return None
            return Val(raw, value_label(key, raw), path, {key: parsed})
        if key == "repeat":
            self.report(path, "`repeat` can't vary per combination; set it once ([matrix])")
            return None
        if isinstance(raw, Mapping):
            return self._table_value(key, raw, path)
        if isinstance(raw, bool | int | float | str):
            return Val(raw, value_label(key, raw), path)
        self.report(
            path, f"matrix values must be strings, numbers, booleans or tables, got {show_value(raw)}"
        )
        return None

    def _table_value(self, key: str, raw: Mapping[str, Any], path: KeyPath) -> Val:
        for inner, value in raw.items():
            where = (*path, inner)
            if inner in JOB_FIELDS:
                continue
            if inner in ("task", "repeat"):
                self.report(
                    where,
                    f"`{inner}` can't be set inside a matrix value; use {'an include entry' if inner == 'task' else 'its own section'}",
                )
            elif inner == "name" and not isinstance(value, str):
                self.report(
                    where, f"`name` labels the value in job ids and must be a string, got {show_value(value)}"
                )
            elif close_field(inner):
                self.report(
                    where,
                    f"not a job field (did you mean `{close_field(inner)}`?); fix the spelling, or rename it if it is a variable",
                )
            elif not _jsonable(value):
                self.report(
                    where, f"dates and times can't be matrix values; write {show_value(value)} as a string"
                )
        # Kept even when a key was wrong (already reported) so duplicate checks still run.
        return Val(dict(raw), value_label(key, raw), path, parse_overlay(raw, path, self.report))

    def _include(self, entries: Any) -> None:
        for index, entry in self._entries(entries, "include"):
            path: KeyPath = ("matrix", "include", index)
            parsed: dict[str, Val] = {}
            for key, raw in entry.items():
                where = (*path, key)
                if key in self.out.axes:
                    # A known axis value is only a filter here; expansion substitutes the
                    # full value when the entry becomes a new combination.
                    probe = Val(raw, "", where)
                    known = any(match(probe, v) for v in self.out.axes[key])
                    val = probe if known else self._value(key, raw, where)
                elif close_field(key) and key not in JOB_FIELDS:
                    self.report(
                        where,
                        f"not a job field or axis (did you mean `{close_field(key)}`?); fix the spelling, or rename it if it is a variable",
                    )
                    val = None
                else:
                    val = self._value(key, raw, where)
                if val is not None:
                    parsed[key] = val
            if len(parsed) == len(entry):
                self.out.include.append(parsed)

    def _exclude(self, entries: Any) -> None:
        axes = ", ".join(self.out.axes)
        for index, entry in self._entries(entries, "exclude"):
            path: KeyPath = ("matrix", "exclude", index)
            parsed: dict[str, Val] = {}
            for key, raw in entry.items():
                if key == "task" and isinstance(raw, str) and raw in self.out.dropped:
                    break  # the task is left out by -i/-x: so is this entry
                if key not in self.out.axes:
                    self.report(
                        (*path, key), f"not an axis; exclude entries match axis values (axes: {axes})"
                    )
                elif not any(match(Val(raw, "", path), v) for v in self.out.axes[key]):
                    self.report(
                        (*path, key),
                        f"{show_value(raw)} is not a value of axis `{key}`, so this entry excludes nothing; fix the value",
                    )
                else:
                    parsed[key] = Val(raw, "", (*path, key))
            if len(parsed) == len(entry):
                self.out.exclude.append(parsed)

    def _entries(self, entries: Any, what: str) -> list[tuple[int, Mapping[str, Any]]]:
        if not isinstance(entries, list):
            self.report(
                ("matrix", what),
                f'expected a list of tables like {what} = [{{ task = "a", variant = "b" }}], got {show_value(entries)}',
            )
            return []
        good = []
        for index, entry in enumerate(entries):
            if not isinstance(entry, Mapping) or not entry:
                self.report(
                    ("matrix", what, index),
                    f'expected a non-empty table like {{ task = "a" }}, got {show_value(entry)}',
                )
            else:
                good.append((index, entry))
        return good

    # --- [[jobs]] ----------------------------------------------------------------------

    def _jobs(self, entries: Any) -> None:
        if not isinstance(entries, list):
            self.report(("jobs",), "expected [[jobs]] entries (an array of tables)")
            return
        for index, entry in enumerate(entries):
            path: KeyPath = ("jobs", index)
            if not isinstance(entry, Mapping):
                self.report(path, f"expected a table, got {show_value(entry)}")
                continue
            job = self._job(entry, path)
            if job is not None:
                self.out.explicit.append(job)

    def _job(self, entry: Mapping[str, Any], path: KeyPath) -> Explicit | None:
        self._check_keys(
            {k: v for k, v in entry.items() if k not in ("task", "repeat")},
            path,
            (*JOB_FIELDS, "name", "matrix"),
        )
        name, task = entry.get("name"), entry.get("task")
        if isinstance(task, str) and task in self.out.dropped:
            return None  # left out by -i/-x
        ok = True
        if not isinstance(name, str) or not _TASK_NAME.match(name):
            self.report(
                (*path, "name") if "name" in entry else path,
                "every [[jobs]] entry needs a `name` (letters, digits, - and _); it becomes part of the job id",
            )
            ok = False
        if not isinstance(task, str) or task not in self.out.tasks:  # (a list or table would not even hash)
            known = ", ".join(self.out.tasks) or "none defined"
            self.report(
                (*path, "task") if "task" in entry else path,
                f"needs `task` naming one of the tasks ({known})",
            )
            ok = False
        repeat = entry.get("repeat", self.out.repeat)
        if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= MAX_REPEAT:
            self.report(
                (*path, "repeat"), f"expected a whole number from 1 to {MAX_REPEAT}, got {show_value(repeat)}"
            )
            ok = False
        variables = entry.get("matrix", {})
        if not isinstance(variables, Mapping) or not _jsonable(variables):
            self.report(
                (*path, "matrix"), 'expected a table of template variables, e.g. matrix = { style = "terse" }'
            )
            ok = False
        overlay = parse_overlay(entry, path, self.report)
        if not ok:
            return None
        return Explicit(str(name), str(task), dict(variables), overlay, int(repeat), path)


def _unknown(what: str, key: str, allowed: tuple[str, ...], listing: str | None = None) -> str:
    guess = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    hint = f"did you mean `{guess[0]}`?" if guess else f"expected {listing or ', '.join(allowed)}"
    return f"unknown {what}; {hint}"


def _jsonable(value: Any) -> bool:
    if isinstance(value, Mapping):
        return all(_jsonable(v) for v in value.values())
    if isinstance(value, list):
        return all(_jsonable(v) for v in value)
    return isinstance(value, str | int | float | bool)
