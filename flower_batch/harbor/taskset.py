"""The task folders a `[tasksets.NAME] harbor = "..."` names, and globs on task names.

`harbor` is one task folder (it holds task.toml or instruction.md) or a folder of them (each
sub-folder that does; hidden folders and others are passed over). Globs are fnmatch patterns on
task names (`fix-*`, `*-git`), used by the section's include/exclude and by `matrix -i/-x`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

from flower_batch.errors import HarborTaskError

from .task_folder import task_name

_MARKS = ("task.toml", "instruction.md")


def is_task_folder(folder: Path) -> bool:
    return any((folder / mark).is_file() for mark in _MARKS)


def task_folders(path: Path) -> dict[str, Path]:
    """Task name -> folder, in name order.

    Raises:
        HarborTaskError: `path` is no folder, holds no task folder, or two folders give one name.
    """
    if not path.is_dir():
        raise HarborTaskError(f'"{path}" is not a folder; harbor = names a task folder or a folder of them')
    if is_task_folder(path):
        return {task_name(path): path}
    found: dict[str, Path] = {}
    for child in sorted(path.iterdir()):
        if child.name.startswith(".") or not child.is_dir() or not is_task_folder(child):
            continue
        name = task_name(child)
        if name in found:
            raise HarborTaskError(f'{child} and {found[name]} both make task "{name}"; rename one folder')
        found[name] = child
    if not found:
        raise HarborTaskError(
            f"{path} holds no Harbor task folder (a folder with task.toml and instruction.md)"
        )
    return found


def matches(name: str, globs: Iterable[str]) -> bool:
    return any(fnmatchcase(name, glob) for glob in globs)


def select(names: Sequence[str], include: Sequence[str], exclude: Sequence[str]) -> list[str]:
    """`names` that an include glob matches (all, with none) and no exclude glob matches."""
    return [n for n in names if (not include or matches(n, include)) and not matches(n, exclude)]


def unmatched(names: Sequence[str], globs: Sequence[str]) -> list[str]:
    """The globs that match none of `names`: each one a mistake worth a line."""
    return [glob for glob in globs if not any(fnmatchcase(n, glob) for n in names)]
