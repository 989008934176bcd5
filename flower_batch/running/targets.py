"""Ship a job's workflow code into its folder (`flows/`, mounted read-only at /flows).

A target is `module:attr` (found on the search path: the current directory first) or
`path/to/file.py:attr`. The module must be one self-contained file (it may import flower).
Copying it into the job folder is what makes a job reproducible later: `wake` and `repro` use
the copy, not whatever the file says by then.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from flower_batch.errors import TargetNotFound
from flower_batch.layout import FLOWS


def locate(target: str, search: Sequence[Path] = ()) -> tuple[Path, str, str]:
    """(source file, module path inside /flows, attr) for a workflow target."""
    if ":" not in target:
        raise TargetNotFound(f"workflow {target!r}: expected module:attr or file.py:attr")
    where, attr = target.rsplit(":", 1)
    roots = list(dict.fromkeys([Path.cwd(), *search]))  # each folder named once in messages
    if where.endswith(".py"):
        for root in roots:
            path = (root / where).resolve()
            if path.is_file():
                return path, path.name, attr
        raise TargetNotFound(
            f"workflow {target!r}: {where} not found (looked in {', '.join(map(str, roots))})"
        )
    rel = Path(*where.split("."))
    for root in roots:
        path = root / rel.with_suffix(".py")
        if path.is_file():
            return path.resolve(), str(rel.with_suffix(".py")), attr
        if (root / rel / "__init__.py").is_file():
            raise TargetNotFound(
                f"workflow {target!r}: {where} is a package; point at a single module file (module:attr)"
            )
    raise TargetNotFound(
        f"workflow {target!r}: module {where} not found (looked in {', '.join(map(str, roots))})"
    )


def stage_workflow(target: str, flows_dir: Path, search: Sequence[Path] = ()) -> None:
    """Copy the target's module into `flows_dir`."""
    source, rel, _ = locate(target, search)
    dest = flows_dir / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)


def container_target(target: str) -> str:
    """The target as the container sees it: modules via PYTHONPATH=/flows, files under /flows."""
    where, attr = target.rsplit(":", 1)
    return f"{FLOWS}/{Path(where).name}:{attr}" if where.endswith(".py") else target
