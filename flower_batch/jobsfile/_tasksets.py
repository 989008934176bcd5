"""`[tasksets.NAME]`: Harbor task folders as tasks (flower_batch/harbor/ reads each folder).

A section takes `harbor = "path"` (one task folder or a folder of them, relative to the jobs
file), `include`/`exclude` globs on task names, `pass_reward` (the reward a job must reach to
pass, default 1.0) and any job field, which overrides what the task folders say. Each selected
folder becomes a task: its own layer (`folder`) sits between [defaults] and the section's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from flower_batch.errors import HarborTaskError
from flower_batch.harbor.task_folder import IMAGE_WORKDIR, TaskFolder, read_task
from flower_batch.harbor.taskset import select, task_folders, unmatched
from flower_batch.jobmodel.grading import DEFAULT_PASS_REWARD

from ._fields import JOB_FIELDS, Overlay, is_invalid, parse_overlay, show_value
from ._keypath import KeyPath
from ._templating import Literal

Report = Callable[[KeyPath, str], None]
TASKSET_KEYS = ("harbor", "include", "exclude", "pass_reward")
SECTION_FIELDS = tuple(name for name in JOB_FIELDS if name != "exclude")
"""A section's job fields: `exclude` there is the globs on task names (a Harbor task has no
workspace copy to leave files out of)."""


@dataclass(frozen=True)
class Narrowing:
    """`matrix -i GLOB` / `-x GLOB`: the tasks of any jobs file, narrowed by name."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.include or self.exclude)


@dataclass(frozen=True)
class HarborSource:
    """One Harbor task of a task set: the folder read, its layer of job fields, its section."""

    taskset: str
    task: TaskFolder
    folder_layer: Overlay
    pass_reward: float = DEFAULT_PASS_REWARD


@dataclass
class TaskSets:
    sources: dict[str, HarborSource] = field(default_factory=dict)
    overlays: dict[str, Overlay] = field(default_factory=dict)
    """Task name -> its section's job fields (the [tasks.NAME] layer of a Harbor task)."""
    names: dict[str, str] = field(default_factory=dict)
    """Every task name the sections select (before `-i`/`-x` narrow them) -> its section."""


def parse_tasksets(
    table: Mapping[str, Any], base_dir: Path, report: Report, narrowing: Narrowing
) -> TaskSets:
    out = TaskSets()
    for name, section in table.items():
        path: KeyPath = ("tasksets", name)
        if not isinstance(section, Mapping):
            report(path, f"expected a table [tasksets.{name}], got {show_value(section)}")
            continue
        _read_section(name, section, base_dir, report, narrowing, out)
    return out


def _read_section(
    name: str,
    section: Mapping[str, Any],
    base_dir: Path,
    report: Report,
    narrowing: Narrowing,
    out: TaskSets,
) -> None:
    path: KeyPath = ("tasksets", name)
    for key in section:
        if key not in TASKSET_KEYS and key not in SECTION_FIELDS:
            report((*path, key), f"unknown key; use {', '.join(TASKSET_KEYS)} or a job field")
    fields = {k: v for k, v in section.items() if k in SECTION_FIELDS}
    overlay = parse_overlay(fields, path, report)
    include = _globs(section, "include", path, report)
    exclude = _globs(section, "exclude", path, report)
    pass_reward = _section_pass_reward(section, overlay, (*path, "pass_reward"), report)
    folders = _folders(section.get("harbor"), base_dir, (*path, "harbor"), report)
    if folders is None or include is None or exclude is None:
        return
    names = list(folders)
    for glob in unmatched(names, [*include, *exclude]):
        which = "include" if glob in include else "exclude"
        report((*path, which), f'"{glob}" selects no task ({_listing(names)}); fix the glob')
    chosen = select(names, include, exclude)
    for task in chosen:
        if task in out.names:
            report(
                (*path, "harbor"), f'task "{task}" is also in [tasksets.{out.names[task]}]; select it in one'
            )
    chosen = [task for task in chosen if task not in out.names]
    out.names.update(dict.fromkeys(chosen, name))
    for task in select(chosen, narrowing.include, narrowing.exclude):
        try:
            found = read_task(folders[task])
        except HarborTaskError as exc:
            report((*path, "harbor"), str(exc))
            continue
        layer = folder_layer(found, (*path, "harbor"))
        out.sources[task] = HarborSource(name, found, layer, pass_reward or 0.0)
        out.overlays[task] = overlay


def folder_layer(task: TaskFolder, where: KeyPath) -> Overlay:
    """The job fields a task folder sets, as a layer of parsed values (its text never rendered).
    Every Harbor task gets a writable root (Terminal-Bench tasks change files anywhere in their
    image) and works in its image's WORKDIR, found when the image is built (running/)."""
    layer: Overlay = {
        "prompt": Literal(task.prompt, where),
        "network": task.network,
        "root": "writable",
        "user": task.user,
        "workdir": IMAGE_WORKDIR,
    }
    if task.image:
        layer["image"] = Literal(task.image, where)
    if task.build_dir:
        layer["build"] = {"dir": Literal(str(task.build_dir), where)}
    for name, value in (
        ("timeout", task.timeout_s),
        ("cpus", task.cpus),
        ("memory", task.memory_bytes),
        ("disk", task.disk_bytes),
    ):
        if value is not None:
            layer[name] = value
    return layer


def graded(source: HarborSource | None) -> dict[str, Any]:
    """The JobSpec fields a Harbor task's jobs get beyond its job fields: its hidden tests (with
    the section's pass_reward) and where it came from."""
    if source is None:
        return {}
    return {
        "verifier": replace(source.task.verifier, pass_reward=source.pass_reward),
        "harbor": source.task.harbor,
    }


def _folders(raw: Any, base_dir: Path, where: KeyPath, report: Report) -> dict[str, Path] | None:
    if raw is None:
        report(where[:-1], 'has no harbor; write harbor = "path/to/tasks" (relative to the jobs file)')
        return None
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
        report(where, f'expected a folder path like "tasks/terminal-bench", got {show_value(raw)}')
        return None
    folder = (base_dir / raw).resolve()
    if not folder.exists():
        report(where, f'"{raw}" not found (looked for {folder}); paths are relative to the jobs file')
        return None
    try:
        return task_folders(folder)
    except HarborTaskError as exc:
        report(where, str(exc))
        return None


def _globs(section: Mapping[str, Any], key: str, path: KeyPath, report: Report) -> list[str] | None:
    raw = section.get(key, [])
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(g, str) and g for g in raw):
        report(
            (*path, key),
            f'expected a list of globs on task names like ["fix-*", "*-git"], got {show_value(raw)}',
        )
        return None
    return list(raw)


def _section_pass_reward(
    section: Mapping[str, Any], overlay: Overlay, where: KeyPath, report: Report
) -> float | None:
    """The section's pass_reward: checked here, or, where it is a job field too (jobs.toml's
    `pass_reward`), as that field was (its one problem already reported)."""
    if "pass_reward" in SECTION_FIELDS:
        value = overlay.get("pass_reward", DEFAULT_PASS_REWARD)
        return None if is_invalid(value) else float(value)
    return _pass_reward(section.get("pass_reward", DEFAULT_PASS_REWARD), where, report)


def _pass_reward(raw: Any, where: KeyPath, report: Report) -> float | None:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        report(where, f"expected the reward a job must reach to pass, like 1.0 or 0.5, got {show_value(raw)}")
        return None
    return float(raw)


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(names[:5]) + ("…" if len(names) > 5 else "")
    return f"tasks: {shown}" if names else "no tasks"
