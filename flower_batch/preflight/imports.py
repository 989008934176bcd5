"""Import every workflow target in ONE container of the pinned image, before any job folder exists.

A workflow module may import packages that only the image has, so the host cannot tell
whether it loads: the container can. Each distinct target's module is copied into a
temporary folder outside the home (`<tmp>/<i>/`), mounted read-only at /flows, and one
`python` process loads them all with flower's own loader, printing one JSON line per target.
A module that kills the process (os._exit, a segfault) or hangs is named too: every target
announces itself before it is imported.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio

from flower.exitinfo import one_line
from flower_batch.backend.base import Backend, ContainerSpec, Mount
from flower_batch.running.targets import locate

from ..errors import FlowerBatchError
from ..layout import FLOWER_PYTHON, FLOWS

IMPORT_TIMEOUT_S = 120.0

# Runs inside the container: argv is pairs of (folder under /flows, target as the job sees it).
# Each target gets its folder first on sys.path, and modules loaded from /flows are forgotten
# afterwards, so two targets with the same module name never see each other's module.
_SCRIPT = r"""
import json, sys
from flower.errors import TargetError
from flower.flows.loader import load_workflow
args = sys.argv[1:]
for i in range(0, len(args), 2):
    folder, target = args[i], args[i + 1]
    print(json.dumps({"start": target}), flush=True)
    sys.path.insert(0, folder)
    try:
        load_workflow(target)
        result = {"target": target, "ok": True}
    except TargetError as exc:
        result = {"target": target, "error": str(exc)}
    except BaseException as exc:
        result = {"target": target, "error": f"importing it raised {type(exc).__name__}: {exc}"}
    finally:
        sys.path.remove(folder)
        for name, mod in list(sys.modules.items()):
            if str(getattr(mod, "__file__", "") or "").startswith("/flows/"):
                del sys.modules[name]
    print(json.dumps(result), flush=True)
"""


@dataclass(frozen=True)
class Target:
    """One workflow target to check: as written (`flows.py:main`), with where its module is."""

    written: str
    label: str  # how the line names it: `jobs.toml: workflow "flows.py:main" (task a)`
    source: Path | None = None  # the module file on the host (None: taken from `flows_dir`)
    rel: str | None = None  # where the job's flows/ holds that module (as targets.stage_workflow)
    flows_dir: Path | None = None  # an existing flows/ copy (wake, repro): mounted as it is


def _in_container(target: str, folder: str) -> str:
    where, attr = target.rsplit(":", 1)
    return f"{folder}/{Path(where).name}:{attr}" if where.endswith(".py") else target


def _strip_prefix(message: str) -> str:
    """flower's TargetError starts with `target '<container path>': `; the label replaces it, and
    the check's own folders (/flows/<i>/) mean nothing to the user."""
    if message.startswith("target '") and "': " in message:
        message = message.split("': ", 1)[1]
    return re.sub(rf"{FLOWS}/\d+/", "", message)


async def import_problems(
    backend: Backend,
    image_id: str,
    targets: Sequence[Target],
    *,
    labels: dict[str, str],
    timeout_s: float = IMPORT_TIMEOUT_S,
    scratch: Path | None = None,
    seen: TargetsSeen | None = None,
) -> list[str]:
    """One line per target that does not load as a flower.Workflow in the image (none: []).

    `scratch`: stage everything in a folder there, flows/ copies included, and mount only that
    (a cluster's engine sees the shared home, not this host's /tmp or project). `seen`: targets
    already seen to load (import_cache.ImportCache), skipped and told of each new one that loads."""
    if seen is not None:
        targets = [t for t in targets if not seen.known(image_id, t)]
    if not targets:
        return []
    if scratch is not None:
        scratch.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="flower-batch-preflight-", dir=scratch))
    try:
        mounts, argv = _stage(targets, staging, copy_flows=scratch is not None)
        spec = ContainerSpec(
            image=image_id,
            command=[FLOWER_PYTHON, "-c", _SCRIPT, *argv],
            env={"HOME": "/tmp"},
            mounts=mounts,
            working_dir="/tmp",
            labels=labels,
            network="none",
        )
        lines, code, timed_out = await _run(backend, spec, timeout_s)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    problems = problems_by_target(targets, argv, lines, code, timed_out, timeout_s)
    if seen is not None:
        for target in targets:
            if target not in problems:
                seen.remember(image_id, target)
    return list(problems.values())


def _stage(targets: Sequence[Target], staging: Path, *, copy_flows: bool) -> tuple[list[Mount], list[str]]:
    """Each target's module (or flows/ copy: mounted, or copied in with `copy_flows`) under
    `staging`/<i>/; the mounts and the script's argv."""
    mounts: list[Mount] = []
    argv: list[str] = []
    for i, target in enumerate(targets):
        folder = f"{FLOWS}/{i}"
        (staging / str(i)).mkdir()  # the mount point of a flows/ copy, or the staged module's folder
        if target.flows_dir is not None and copy_flows:
            shutil.copytree(
                target.flows_dir,
                staging / str(i),
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        elif target.flows_dir is not None:
            mounts.append(Mount(str(target.flows_dir.resolve()), folder, read_only=True))
        else:
            assert target.source is not None and target.rel is not None
            dest = staging / str(i) / target.rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(target.source, dest)
        argv += [folder, _in_container(target.written, folder)]
    os.chmod(staging, 0o755)
    return [Mount(str(staging), FLOWS, read_only=True), *mounts], argv


class TargetsSeen(Protocol):
    def known(self, image_id: str, target: Target) -> bool: ...
    def remember(self, image_id: str, target: Target) -> None: ...


async def _run(backend: Backend, spec: ContainerSpec, timeout_s: float) -> tuple[list[str], int | None, bool]:
    container = await backend.create(spec)
    try:
        await backend.start(container)
        try:
            code: int | None = await backend.wait(container, timeout=timeout_s)
            timed_out = False
        except TimeoutError:
            code, timed_out = None, True
        lines = [line async for line in backend.logs(container)]
    finally:
        with anyio.CancelScope(shield=True):
            try:
                await backend.remove(container, force=True)
            except FlowerBatchError:
                pass
    return lines, code, timed_out


def problems_by_target(
    targets: Sequence[Target],
    argv: list[str],
    lines: list[str],
    code: int | None,
    timed_out: bool,
    timeout_s: float,
) -> dict[Target, str]:
    """The line of each target that did not load; a target not in it loaded."""
    by_container = {argv[i + 1]: targets[i // 2] for i in range(0, len(argv), 2)}
    results: dict[str, dict[str, Any]] = {}
    last_started: str | None = None
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue  # the module's own output
        if not isinstance(item, dict):
            continue
        if "start" in item:
            last_started = str(item["start"])
        elif "target" in item:
            results[str(item["target"])] = item
    out: dict[Target, str] = {}
    for container_target, target in by_container.items():
        item = results.get(container_target)
        if item is None:
            if container_target == last_started:
                why = (
                    f"importing it did not finish within {timeout_s:.0f}s"
                    if timed_out
                    else f"importing it ended the Python process (exit code {code})"
                )
            else:
                why = "not checked: an earlier workflow's import ended the check"
            out[target] = f"{target.label}: {why}"
        elif not item.get("ok"):
            out[target] = f"{target.label}: {one_line(_strip_prefix(str(item.get('error'))))}"
    return out


def host_target(written: str, label: str, search: Sequence[Path]) -> tuple[Target | None, str | None]:
    """A target found on the host (its module copied in later), or the one-line problem."""
    try:
        source, rel, _ = locate(written, search)
    except FlowerBatchError as exc:
        return None, f"{label}: {one_line(_strip_workflow(str(exc)))}{_did_you_mean(written, search)}"
    except (OSError, ValueError) as exc:  # a NUL byte, a name too long: not even a path to look up
        return None, f"{label}: not a usable module path ({exc}); write module:attr or file.py:attr"
    return Target(written=written, label=label, source=source, rel=rel), None


def _strip_workflow(message: str) -> str:
    return message.split("': ", 1)[1] if message.startswith("workflow '") and "': " in message else message


def _did_you_mean(written: str, search: Sequence[Path]) -> str:
    import difflib

    where = written.rsplit(":", 1)[0]
    roots = [Path.cwd(), *search]
    if where.endswith(".py"):
        folder = Path(where).parent
        names = sorted(
            {
                str(folder / p.name) if str(folder) != "." else p.name
                for root in roots
                for p in (root / folder).glob("*.py")
            }
        )
    else:  # a module name: the .py files beside it, as module names
        parts = where.split(".")
        package = Path(*parts[:-1]) if len(parts) > 1 else Path()
        prefix = ".".join(parts[:-1]) + "." if len(parts) > 1 else ""
        names = sorted({prefix + p.stem for root in roots for p in (root / package).glob("*.py")})
    guess = difflib.get_close_matches(where, names, n=1, cutoff=0.6)
    return f" (did you mean {guess[0]}?)" if guess else ""
