"""Each distinct workspace a run would copy, scanned once before anything is written: a copy
over its size limit or past the bounds is refused (one line: its size, its largest folders, the
fix), a home that is the workspace itself (or holds it) is refused, and so is a home given
explicitly (--home, $FLOWER_BATCH_HOME) inside it; the default ./volumes inside it is left out
of the copy. What a copy would skip (FIFOs, sockets, devices, symlinks out of it) is named in a
warning."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.units import format_memory
from flower_batch.running.workspace_copy import human_size, size_problem
from flower_batch.untrusted_files import shown
from flower_batch.workspace_scan import rules_for, scan


@dataclass
class WorkspaceFindings:
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


START_ROOM = 24 * 1024**2
"""What a job's own disk needs beside its workspace copy to start: its filesystem's journal and
tables, and flower's runs folder."""


def disk_problem(job: JobSpec, workspace_bytes: int) -> str | None:
    """A `disk` below what the job needs to start (its workspace copy and START_ROOM), or None."""
    needed = workspace_bytes + workspace_bytes // 10 + START_ROOM
    if job.disk_bytes >= needed:
        return None
    least = -(-needed // 1024**2)
    return (
        f'job {job.id}: disk = "{format_memory(job.disk_bytes)}" is below what it needs to start: its workspace '
        f"copy is {human_size(workspace_bytes)}, and its filesystem and runs folder need {human_size(START_ROOM)} more; "
        f'give it at least disk = "{least}m"'
    )


def workspace_findings(
    jobs: Sequence[JobSpec], home: Path | None, *, fix: str, home_given: bool = False
) -> WorkspaceFindings:
    """The problems and warnings of the workspaces `jobs` copy. `fix`: how this command allows
    a larger copy (a jobs.toml field, a `run` option); `home_given`: the home was named by
    --home or $FLOWER_BATCH_HOME, not the default ./volumes."""
    found = WorkspaceFindings()
    seen: set[tuple[Path, tuple[str, ...], int | None, int]] = set()
    for job in jobs:
        if job.workspace is None:
            continue
        key = (job.workspace, job.exclude, job.workspace_limit, job.disk_bytes)
        if key in seen:
            continue
        seen.add(key)
        source = job.workspace.resolve()
        if home is not None and (source == home.resolve() or home.resolve() in source.parents):
            found.problems.append(
                f"workspace {shown(str(source))} is inside the flower-batch home {shown(str(home))}: "
                "give a home outside the project (--home or FLOWER_BATCH_HOME)"
            )
            continue
        if home_given and home is not None and source in home.resolve().parents:
            found.problems.append(
                f"the flower-batch home {shown(str(home))} (--home or FLOWER_BATCH_HOME) is inside workspace "
                f"{shown(str(source))}: give a home outside it, or none (./volumes, left out of every copy)"
            )
            continue
        rules = rules_for(source, job.exclude, leave_out=() if home is None else (home,))
        scanned = scan(source, rules)
        problem = size_problem(scanned, job.workspace_limit, fix=fix) or disk_problem(
            job, scanned.total_bytes
        )
        if problem:
            found.problems.append(problem)
        skipped = scanned.skipped_line()
        if skipped:
            found.warnings.append(f"workspace {shown(str(source))}: not copied: {skipped}")
    return found
