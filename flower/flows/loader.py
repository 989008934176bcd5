"""Resolve `module:attr` or `path/to/file.py:attr` to a Workflow (for `flower run`, `flower-batch`)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from flower.errors import TargetError
from flower.flows.workflow import Workflow


def load_object(target: str) -> Any:
    if ":" not in target:
        raise TargetError(f"target {target!r}: expected module:attr or file.py:attr (e.g. flows.py:main)")
    where, attr = target.rsplit(":", 1)
    if where.endswith(".py"):
        path = Path(where).resolve()
        if not path.is_file():
            raise TargetError(f"target {target!r}: file {path} does not exist")
        name = f"_flower_target_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise TargetError(f"target {target!r}: cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise TargetError(
                f"target {target!r}: importing {path.name} failed: {type(exc).__name__}: {exc}"
            ) from exc
    else:
        if "" not in sys.path and "." not in sys.path:
            sys.path.insert(0, "")
        try:
            module = importlib.import_module(where)
        except Exception as exc:
            raise TargetError(
                f"target {target!r}: cannot import module {where!r}: {type(exc).__name__}: {exc}"
            ) from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise TargetError(f"target {target!r}: {where} has no attribute {attr!r}") from None


def add_flower_path(folders: str) -> None:
    """FLOWER_PATH (os.pathsep-separated folders, read by `flower`'s main) is where workflow modules
    are imported from, for flower only: unlike PYTHONPATH it changes nothing for the commands the
    agent runs (flower-batch sets it to /flows)."""
    for folder in reversed(folders.split(os.pathsep)):
        if folder and folder not in sys.path:
            sys.path.insert(0, folder)


def load_workflow(target: str) -> Workflow:
    """The attribute may be a Workflow or a zero-argument callable returning one."""
    obj = load_object(target)
    if callable(obj) and not isinstance(obj, Workflow):
        try:
            obj = obj()
        except Exception as exc:
            raise TargetError(
                f"target {target!r}: calling {target} failed: {type(exc).__name__}: {exc}"
            ) from exc
    if not isinstance(obj, Workflow):
        raise TargetError(f"target {target!r}: expected a flower.Workflow, got {type(obj).__name__}")
    return obj
