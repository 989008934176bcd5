"""Job fields: what each one accepts, how it is normalised, and how layers merge.

A field may be set in [defaults], in a [tasks.X] table, by a matrix axis or include
entry, or by an explicit [[jobs]] entry. Each layer is parsed into an `Overlay` (only
the fields it sets) and overlays are merged from lowest to highest precedence. An
absent key is simply not in the overlay (our "unset"), which is different from a value.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from flower_batch.jobmodel import fields
from flower_batch.jobmodel.modes import MODES, parse_mode

from ..envnames import env_name_problem, looks_secret, secret_name_problem, valid_env_name
from ._keypath import KeyPath
from ._templating import Template

Report = Callable[[KeyPath, str], None]
Overlay = dict[str, Any]

JOB_FIELDS = (
    "workflow",
    "prompt",
    "args",
    "model",
    "workspace",
    "check",
    "check_timeout",
    "timeout",
    "cpus",
    "memory",
    "env",
    "secrets",
    "gateway",
    "budget_usd",
    "placement",
    "pids",
    "network",
    "persistent",
    "image",
    "build",
    "exclude",
    "workspace_limit",
    "root",
    "user",
    "workdir",
    "pass_reward",
    "disk",
)
ENVIRONMENT_FIELDS = ("image", "build")
"""A job's environment: one or the other; a later layer's choice replaces an earlier one's."""
BUILD_KEYS = ("dir", "dockerfile", "args")
GATEWAY_KEYS = ("mode", "scenario", "recording")
_INVALID = object()
_MERGED = ("env", "args", "gateway", "secrets")


def close_field(name: str) -> str | None:
    """The job field `name` is probably a typo of, if any."""
    found = difflib.get_close_matches(name, JOB_FIELDS, n=1, cutoff=0.8)
    return found[0] if found else None


def parse_overlay(table: Mapping[str, Any], path: KeyPath, report: Report) -> Overlay:
    """Parse the job fields present in `table` (other keys are the caller's business)."""
    overlay: Overlay = {}
    if all(name in table for name in ENVIRONMENT_FIELDS):
        report((*path, "build"), "set `image` or `build`, not both: a task runs in one image")
    for name in JOB_FIELDS:
        if name in table:
            # An invalid value stays as the INVALID marker: the field counts as set (and
            # already reported), so later checks don't add a second, misleading error.
            overlay[name] = parse_field(name, table[name], (*path, name), report)
    if all(name in table for name in ENVIRONMENT_FIELDS):
        overlay["build"] = _INVALID  # reported above: not looked for as well
    return overlay


def parse_field(name: str, value: Any, path: KeyPath, report: Report) -> Any:
    """Normalise one field value, or report why it is wrong and return the INVALID marker."""
    parser = _PARSERS[name]
    return parser(value, path, report)


def is_invalid(value: Any) -> bool:
    return value is _INVALID


def merge(*overlays: Overlay) -> Overlay:
    """Later overlays win; env, args and gateway merge key by key, secrets accumulate."""
    merged: Overlay = {}
    for overlay in overlays:
        for name, value in overlay.items():
            if value is _INVALID or (merged.get(name) is _INVALID and name in _MERGED):
                merged[name] = _INVALID  # merging into a broken value gives a broken value
            elif name in ("env", "args", "gateway") and name in merged:
                merged[name] = {**merged[name], **value}
            elif name in ENVIRONMENT_FIELDS:
                for other in ENVIRONMENT_FIELDS:
                    merged.pop(other, None)
                merged[name] = value
            elif name == "secrets" and name in merged:
                merged[name] = tuple(dict.fromkeys((*merged[name], *value)))
            else:
                merged[name] = value
    return merged


# --- parsers (one per field) --------------------------------------------------------


def _template(what: str, allow_empty: bool = False) -> Callable[[Any, KeyPath, Report], Any]:
    def parse(value: Any, path: KeyPath, report: Report) -> Any:
        if not isinstance(value, str):
            report(path, f"expected {what} (a string), got {_show(value)}")
            return _INVALID
        if not value.strip() and not allow_empty:
            report(path, f"is empty; write {what}, or remove the key")
            return _INVALID
        template = Template(value, path)
        problem = template.syntax_problem()
        if problem:
            report(path, problem)
            return _INVALID
        return template

    return parse


def _checked(validate: Callable[[Any, fields.Show], Any]) -> Callable[[Any, KeyPath, Report], Any]:
    """A field checked by its one validator (jobmodel/fields.py), its problem reported at `path`."""

    def parse(value: Any, path: KeyPath, report: Report) -> Any:
        parsed = validate(value, _show)
        if isinstance(parsed, fields.Problem):
            report(path, parsed.text)
            return _INVALID
        return parsed

    return parse


def _list_of(
    validate: Callable[[Any, fields.Show], Any], example: str
) -> Callable[[Any, KeyPath, Report], Any]:
    """A field that is a list of items, each checked by `validate` (reported at its index)."""
    item_of = _checked(validate)

    def parse(value: Any, path: KeyPath, report: Report) -> Any:
        if not isinstance(value, list):
            report(path, f"expected a list of {example}, got {_show(value)}")
            return _INVALID
        items: list[Any] = []
        for index, item in enumerate(value):
            checked = item_of(item, (*path, index), report)
            if checked is _INVALID:
                return _INVALID
            items.append(checked)
        return tuple(items)

    return parse


_placement = _list_of(fields.placement, 'constraints like ["node.labels.pool==big"]')
_exclude = _list_of(fields.exclude_pattern, 'path patterns like ["data/", "*.bin"]')


def _env(value: Any, path: KeyPath, report: Report) -> Any:
    if not isinstance(value, Mapping):
        report(path, f'expected a table of NAME = "value", got {_show(value)}')
        return _INVALID
    env: dict[str, Template] = {}
    for name, raw in value.items():
        where = (*path, name)
        problem = env_name_problem(name)
        if problem:
            report(where, problem)
        elif isinstance(raw, bool) or not isinstance(raw, str | int | float):
            report(
                where, f'expected a string value (write it in quotes, e.g. "{_show(raw)}"), got {_show(raw)}'
            )
        elif looks_secret(name) and isinstance(raw, str) and raw and "${{" not in raw:
            report(
                where,
                f'looks like a secret written into the file; delete it and add "{name}" to '
                "`secrets` so its value is taken from the host environment by name",
            )
        else:
            template = _template("a value", allow_empty=True)(str(raw), where, report)
            if template is not _INVALID:
                env[name] = template
    return env


def _secrets(value: Any, path: KeyPath, report: Report) -> Any:
    if not isinstance(value, list):
        report(
            path, f'expected a list of environment variable names like ["GITHUB_TOKEN"], got {_show(value)}'
        )
        return _INVALID
    names: list[str] = []
    for index, name in enumerate(value):
        where = (*path, index)
        if not isinstance(name, str) or not valid_env_name(name):
            report(
                where, f"expected the NAME of a host environment variable (not its value), got {_show(name)}"
            )
        elif problem := secret_name_problem(name):
            report(where, problem)
        else:
            names.append(name)
    return tuple(dict.fromkeys(names))


def _args(value: Any, path: KeyPath, report: Report) -> Any:
    if not isinstance(value, Mapping):
        report(path, f"expected a table of workflow arguments, got {_show(value)}")
        return _INVALID
    result = _json_value(value, path, report)
    return _INVALID if result is _INVALID else result


def _json_value(value: Any, path: KeyPath, report: Report) -> Any:
    if isinstance(value, Mapping):
        items = {k: _json_value(v, (*path, k), report) for k, v in value.items()}
        return _INVALID if _INVALID in items.values() else items
    if isinstance(value, list):
        items_list = [_json_value(v, (*path, i), report) for i, v in enumerate(value)]
        return _INVALID if _INVALID in items_list else items_list
    if isinstance(value, str):
        return _template("a value", allow_empty=True)(value, path, report)
    if isinstance(value, bool | int | float):
        return value
    report(path, f"dates and times can't be passed to a workflow; write {_show(value)} as a string")
    return _INVALID


def _gateway(value: Any, path: KeyPath, report: Report) -> Any:
    if not isinstance(value, Mapping):
        report(
            path, f'expected a table like {{ mode = "scripted", scenario = "demo.json" }}, got {_show(value)}'
        )
        return _INVALID
    gateway: dict[str, Template] = {}
    for key, raw in value.items():
        where = (*path, key)
        if key not in GATEWAY_KEYS:
            report(where, f"unknown gateway key; use {', '.join(GATEWAY_KEYS)}")
            continue
        template = _template("a mode" if key == "mode" else "a path")(raw, where, report)
        if template is _INVALID:
            continue
        if key == "mode" and "${{" not in raw and parse_mode(raw) is None:
            report(where, f"unknown gateway mode {_show(raw)}; use one of {', '.join(MODES)}")
            continue
        gateway[key] = template
    return gateway


def _build(value: Any, path: KeyPath, report: Report) -> Any:
    """`build = "envs/node"` or `build = { dir = "envs/node", dockerfile = "Dockerfile.ci",
    args = { NODE = "20" } }`: each part a template, the folder relative to the jobs file."""
    folder = _template("a folder with a Dockerfile, relative to the jobs file")
    if isinstance(value, str):
        dir_ = folder(value, path, report)
        return _INVALID if dir_ is _INVALID else {"dir": dir_}
    if not isinstance(value, Mapping):
        report(
            path, f'expected a folder like "envs/node" or a table {{ dir = "envs/node" }}, got {_show(value)}'
        )
        return _INVALID
    parsed: dict[str, Any] = {}
    for key, raw in value.items():
        where = (*path, key)
        if key == "dir":
            parsed[key] = folder(raw, where, report)
        elif key == "dockerfile":
            parsed[key] = _template('a file name in the folder, like "Dockerfile.ci"')(raw, where, report)
        elif key == "args":
            parsed[key] = _env(raw, where, report)
        else:
            report(where, f"unknown build key; use {', '.join(BUILD_KEYS)}")
            return _INVALID
    if "dir" not in parsed:
        report(path, 'has no dir; write build = { dir = "envs/node" }')
        return _INVALID
    return _INVALID if _INVALID in parsed.values() else parsed


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"' if len(value) <= 60 else f'"{value[:57]}..."'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return str(value)


show_value = _show

_PARSERS: dict[str, Callable[[Any, KeyPath, Report], Any]] = {
    "workflow": _template('a workflow target like "examples.workflows:careful"'),
    "prompt": _template("the prompt text", allow_empty=True),
    "args": _args,
    "model": _template('a model name like "claude-sonnet-4-5"'),
    "workspace": _template("a directory path relative to the jobs file"),
    "check": _template('a shell command like "test -f out.txt"'),
    "check_timeout": _checked(fields.duration),
    "timeout": _checked(fields.duration),
    "cpus": _checked(fields.cpus),
    "memory": _checked(fields.memory),
    "env": _env,
    "secrets": _secrets,
    "gateway": _gateway,
    "budget_usd": _checked(fields.budget_usd),
    "placement": _placement,
    "pids": _checked(fields.pids),
    "network": _checked(fields.network),
    "persistent": _checked(fields.persistent),
    "image": _template('an image tag or id like "debian:12"'),
    "build": _build,
    "exclude": _exclude,
    "workspace_limit": _checked(fields.workspace_limit),
    "root": _checked(fields.root),
    "user": _checked(fields.user),
    "workdir": _checked(fields.workdir),
    "pass_reward": _checked(fields.pass_reward),
    "disk": _checked(fields.disk),
}
