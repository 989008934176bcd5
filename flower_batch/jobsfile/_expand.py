"""`Parsed` -> `JobSpec`s: combinations, ids, layered fields, rendered templates.

Precedence, lowest first: [defaults] < a Harbor task's folder < [tasks.X] or its
[tasksets.X] section < matrix values (axes in declaration
order, then include-added keys) < the [[jobs]] entry. Problems found while resolving a
job (undefined template references, missing directories) go to the same `Problems`.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flower_batch.errors import TemplateError
from flower_batch.jobmodel.environment import BuildRecipe
from flower_batch.jobmodel.hashing import path_hash, tree_hash
from flower_batch.jobmodel.modes import DEFAULT_MODE, missing_need, parse_mode, unknown_mode
from flower_batch.jobmodel.spec import GatewaySpec, JobSpec
from flower_batch.workspace_scan import rules_for

from ._combos import Combination, combinations
from ._fields import Overlay, is_invalid, merge, show_value
from ._ids import job_id, slugify, variant_of
from ._keypath import KeyPath
from ._parse import Explicit, Parsed, Val, match
from ._problems import Problems
from ._tasksets import graded
from ._templating import RenderContext, Template

DEFAULT_TIMEOUT_S = 1800.0
DEFAULT_CHECK_TIMEOUT_S = 300.0
_TARGET = re.compile(
    r"^[^\s:]+:[A-Za-z_][A-Za-z0-9_]*$"
)  # as flower.flows.loader: module:attr or file.py:attr


@dataclass
class Unit:
    """One combination (or [[jobs]] entry) before repeats: a future column cell."""

    task: str
    labels: list[str]
    variant: str
    values: dict[str, Any]
    overlays: list[Overlay]
    repeat: int
    source: KeyPath


class Expander:
    def __init__(self, parsed: Parsed, base_dir: Path, problems: Problems) -> None:
        self.parsed = parsed
        self.base_dir = base_dir
        self.problems = problems
        self._hashes: dict[Path, str] = {
            source.task.build_dir: source.task.build_hash  # hashed when the folder was read
            for source in parsed.harbor.values()
            if source.task.build_dir and source.task.build_hash
        }
        self._tree_hashes: dict[tuple[Path, tuple[str, ...]], str] = {}
        self._workspaces: dict[str, Path | None] = {}
        self._files: dict[
            str, tuple[Path, str]
        ] = {}  # rendered text -> found file and its hash  # rendered text -> checked directory (hot in huge matrices)

    def expand(self) -> list[JobSpec]:
        units = [*self._matrix_units(), *self._explicit_units()]
        jobs: list[JobSpec] = []
        seen: dict[str, KeyPath] = {}
        for repeat in range(1, max((u.repeat for u in units), default=0) + 1):
            for unit in units:
                if repeat > unit.repeat:
                    continue
                ident = job_id(unit.task, unit.labels, repeat)
                if ident in seen:
                    if repeat == 1:
                        self.problems.add(
                            unit.source,
                            f'produces job id "{ident}" a second time; give it a distinct value, `name` or [[jobs]] name',
                        )
                    continue
                seen[ident] = unit.source
                job = self._resolve(unit, ident, repeat)
                if job is not None:
                    jobs.append(job)
        if not units and not self.problems:
            self.problems.add(
                ("matrix",),
                "expands to no jobs (every combination is excluded); remove an exclude entry or add [[jobs]]",
            )
        return jobs

    # --- units -------------------------------------------------------------------------

    def _matrix_units(self) -> list[Unit]:
        axes = self.parsed.axes
        units = []
        for combo in combinations(axes, self.parsed.include, self.parsed.exclude, match):
            unit = self._unit(combo)
            if unit is not None:
                units.append(unit)
        return units

    def _unit(self, combo: Combination) -> Unit | None:
        axes = self.parsed.axes
        values: dict[str, Val] = dict(combo.values)
        if combo.include_index is not None:
            source: KeyPath = ("matrix", "include", combo.include_index)
            for key, val in values.items():
                if key in axes:  # "quick" in an include names the axis's full table value
                    values[key] = next((v for v in axes[key] if match(val, v)), val)
            if "task" not in values:
                self.problems.add(
                    source,
                    'adds a new combination without `task`; add task = "NAME" (or make it match an existing combination)',
                )
                return None
            labels = [values[a].label for a in axes if a != "task" and a in values]
            labels = labels or [v.label for k, v in values.items() if k not in axes]
        else:
            source = values["task"].path
            labels = [values[a].label for a in axes if a != "task"]
        task = values["task"].raw
        overlays = [v.overlay for v in values.values()]
        raw = {k: v.raw for k, v in values.items()}
        return Unit(task, labels, variant_of(labels), raw, overlays, self.parsed.repeat, source)

    def _explicit_units(self) -> list[Unit]:
        units = []
        for job in self.parsed.explicit:
            units.append(self._explicit_unit(job))
        return units

    def _explicit_unit(self, job: Explicit) -> Unit:
        label = slugify(job.name)
        values = {"task": job.task, **job.variables}
        return Unit(job.task, [label], label, values, [job.overlay], job.repeat, (*job.path, "name"))

    # --- resolution --------------------------------------------------------------------

    # long: one line per job field, rendered and checked in the order of JobSpec
    def _resolve(self, unit: Unit, ident: str, repeat: int) -> JobSpec | None:
        source = self.parsed.harbor.get(unit.task)
        folder = [source.folder_layer] if source else []  # a Harbor task's folder: above [defaults]
        merged = merge(self.parsed.defaults, *folder, self.parsed.tasks.get(unit.task, {}), *unit.overlays)
        # Invalid values were reported while parsing; resolve the rest as if they were unset.
        fields = {name: value for name, value in merged.items() if not is_invalid(value)}
        context = RenderContext(unit.values, unit.task, ident, repeat)
        before = len(self.problems)
        render = self._renderer(context)

        workflow = render(fields.get("workflow"))
        if workflow is not None and not _TARGET.match(workflow):
            self.problems.add(
                fields["workflow"].path,
                f'expected a workflow target "module:attr" like "examples.workflows:careful", got "{workflow}"',
            )
        prompt = render(fields.get("prompt"))
        if (
            workflow is None
            and "workflow" not in merged
            and not (prompt or "").strip()
            and ("prompt" not in merged or prompt is not None)
        ):
            self.problems.add(
                ("tasks", unit.task),
                'has no prompt; the starter flow (used when no `workflow` is set) needs prompt = "..."',
            )
        exclude = tuple(fields.get("exclude", ()))
        workspace, workspace_hash = self._workspace(fields.get("workspace"), render, exclude)
        gateway = self._gateway(fields.get("gateway", {}), render, unit)
        env = {name: render(t) or "" for name, t in fields.get("env", {}).items()}
        args = _render_tree(fields.get("args", {}), render)
        check = render(fields.get("check"))
        model = render(fields.get("model"))
        image = render(fields.get("image"))
        build = self._build(fields.get("build"), render)
        if len(self.problems) > before or gateway is None:
            return None
        return JobSpec(
            id=ident,
            task=unit.task,
            variant=unit.variant,
            repeat=repeat,
            matrix=unit.values,
            prompt=prompt or "",
            workflow=workflow,
            args=args,
            model=model,
            workspace=workspace,
            workspace_hash=workspace_hash,
            check=check,
            check_timeout_s=fields.get("check_timeout", DEFAULT_CHECK_TIMEOUT_S),
            timeout_s=fields.get("timeout", DEFAULT_TIMEOUT_S),
            cpus=fields.get("cpus"),
            memory_bytes=fields.get("memory"),
            env=env,
            secrets=tuple(fields.get("secrets", ())),
            gateway=gateway,
            budget_usd=fields.get("budget_usd"),
            placement=tuple(fields.get("placement", ())),
            pids=fields.get("pids"),
            network=fields.get("network", "gateway"),
            persistent=fields.get("persistent", False),
            image=image.strip() if image else None,
            build=build,
            exclude=exclude,
            workspace_limit=fields.get("workspace_limit"),
            root=fields.get("root", "read-only"),
            user=fields.get("user", "sandbox"),
            workdir=fields.get("workdir"),
            **graded(source),
            pass_reward=fields.get("pass_reward"),
            disk=fields.get("disk"),
        )

    def _renderer(self, context: RenderContext) -> Callable[[Template | None], str | None]:
        def render(template: Template | None) -> str | None:
            if template is None:
                return None
            try:
                return template.render(context)
            except TemplateError as exc:
                self.problems.add(template.path, str(exc), key=("template", exc.ref))
                return None

        return render

    def _workspace(
        self,
        template: Template | None,
        render: Callable[[Template | None], str | None],
        exclude: tuple[str, ...] = (),
    ) -> tuple[Path | None, str | None]:
        text = render(template)
        if template is None or text is None:
            return None, None
        if text not in self._workspaces:
            unusable = _unusable_path(self.base_dir, text)
            if unusable:
                self.problems.add(template.path, unusable)
                return None, None
            found = (self.base_dir / text).resolve()
            self._workspaces[text] = found if found.is_dir() else None
        path = self._workspaces[text] or (self.base_dir / text).resolve()
        if self._workspaces[text] is None:
            self.problems.add(
                template.path,
                f'directory "{text}" not found (looked for {path}); paths are relative to the jobs file',
            )
            return None, None
        # What the copy holds: the workspace's .flowerbatchignore, the job's exclude, no home.
        key = (path, exclude)
        if key not in self._tree_hashes:
            self._tree_hashes[key] = tree_hash(path, rules_for(path, exclude))
        return path, self._tree_hashes[key]

    def _build(
        self, parts: dict[str, Any] | None, render: Callable[[Template | None], str | None]
    ) -> BuildRecipe | None:
        """The build folder, checked (a folder, with its Dockerfile) and hashed once per folder."""
        if parts is None:
            return None
        text, dockerfile = render(parts["dir"]), render(parts.get("dockerfile")) or "Dockerfile"
        args = {name: render(t) or "" for name, t in parts.get("args", {}).items()}
        if text is None:
            return None
        where = parts["dir"].path
        unusable = _unusable_path(self.base_dir, text)
        folder = (self.base_dir / text).resolve()
        if unusable or not folder.is_dir():
            self.problems.add(
                where,
                unusable
                or f'build folder "{text}" not found (looked for {folder}); paths are relative to the jobs file',
            )
            return None
        if "/" in dockerfile or not (folder / dockerfile).is_file():
            self.problems.add(
                where, f'build folder "{text}" has no {dockerfile} (looked for {folder / dockerfile})'
            )
            return None
        if folder not in self._hashes:
            self._hashes[folder] = tree_hash(folder)
        return BuildRecipe(folder, self._hashes[folder], dockerfile, args)

    def _gateway(
        self, fields: dict[str, Template], render: Callable[[Template | None], str | None], unit: Unit
    ) -> GatewaySpec | None:
        mode_template = fields.get("mode")
        text = render(mode_template) or DEFAULT_MODE
        where = mode_template.path if mode_template else ("tasks", unit.task)
        mode = parse_mode(text)
        if mode is None:
            self.problems.add(where, unknown_mode(text))
            return None
        rules = mode.rules
        if rules.needs is None:
            return GatewaySpec(mode=mode)
        missing = (
            f'{missing_need(mode, None)}: add {rules.needs} = "{rules.needs_example}" to the gateway table'
        )
        found = self._file(fields.get(rules.needs), render, where, missing)
        if found is None:
            return None
        files: dict[str, Any] = {rules.needs: found[0], f"{rules.needs}_hash": found[1]}
        return GatewaySpec(mode=mode, **files)

    def _file(
        self,
        template: Template | None,
        render: Callable[[Template | None], str | None],
        where: KeyPath,
        missing: str,
    ) -> tuple[Path, str] | None:
        if template is None:
            self.problems.add(where, missing)
            return None
        text = render(template)
        if text is None:
            return None
        if text in self._files:  # the same scenario for every job of a huge matrix: resolved once
            return self._files[text]
        unusable = _unusable_path(self.base_dir, text)
        if unusable:
            self.problems.add(template.path, unusable)
            return None
        path = (self.base_dir / text).resolve()
        if not path.exists():
            self.problems.add(
                template.path, f'"{text}" not found (looked for {path}); paths are relative to the jobs file'
            )
            return None
        if path not in self._hashes:
            self._hashes[path] = path_hash(path)
        self._files[text] = (path, self._hashes[path])
        return self._files[text]


def _unusable_path(base_dir: Path, text: str) -> str | None:
    """Why a path cannot even be looked up (NUL byte, a name too long), as the fix to make."""
    if "\x00" in text:
        return f"{show_value(text)[:80]} contains a NUL character; write a plain relative path"
    try:
        os.stat(base_dir / text)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None
    except OSError as exc:
        if exc.errno in (errno.ENAMETOOLONG, errno.EINVAL, errno.ELOOP):
            return (
                f"{show_value(text)[:80]} is not a usable path ({exc.strerror}); write a plain relative path"
            )
    except ValueError as exc:
        return f"{show_value(text)[:80]} is not a usable path ({exc}); write a plain relative path"
    return None


def _render_tree(value: Any, render: Callable[[Template | None], str | None]) -> Any:
    if isinstance(value, Template):
        return render(value)
    if isinstance(value, dict):
        return {k: _render_tree(v, render) for k, v in value.items()}
    if isinstance(value, list):
        return [_render_tree(v, render) for v in value]
    return value
