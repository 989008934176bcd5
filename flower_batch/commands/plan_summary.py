"""What `matrix --dry-run` prints: every job up to LISTED (a task set of hundreds is listed, a
line per job, to read or grep), else a summary.

Past that a line per job helps nobody (200,000 lines take longer to print than to plan): the
summary gives the counts per action and reason, per axis, and the first and last jobs.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Sequence

from flower_batch.jobmodel.resume import Decision, ResumePlan
from flower_batch.jobmodel.spec import JobSpec

EDGE = 5  # jobs shown at each end of a summarised plan
LISTED = 1000
"""Jobs a plan lists one per line at least, whatever the screen's height."""


def screenful() -> int:
    """The jobs listed one per line: LISTED, or a taller screen's worth."""
    return max(LISTED, shutil.get_terminal_size((80, 24)).lines - 6)


def _line(d: Decision) -> str:
    return f"{d.action.value:5} {d.job_id}  ({d.reason})"


def plan_lines(plan: ResumePlan, jobs: Sequence[JobSpec], limit: int | None = None) -> list[str]:
    limit = screenful() if limit is None else limit
    decisions = plan.decisions
    if len(decisions) <= limit:
        return [_line(d) for d in decisions]
    out = [f"{len(decisions):,} jobs (more than {limit:,}: summarised)"]
    for (action, reason), n in Counter((d.action.value, d.reason) for d in decisions).most_common(EDGE):
        out.append(f"  {action:5} {n:>9,}  {reason}")
    out += _axes(jobs)
    out.append(f"first {EDGE}:")
    out += [f"  {_line(d)}" for d in decisions[:EDGE]]
    out.append(f"last {EDGE}:")
    out += [f"  {_line(d)}" for d in decisions[-EDGE:]]
    return out


def rerun_lines(plan: ResumePlan, shown_ids: int = 3) -> list[str]:
    """Why finished jobs run again (an input changed, --fresh, --retry-failed), one line per
    reason with its first jobs: what `matrix` says before it runs, --dry-run or not."""
    by_reason: dict[str, list[str]] = {}
    for d in plan.to_run:
        if d.previous is not None and d.previous.finished:
            by_reason.setdefault(d.reason, []).append(d.job_id)
    out = []
    for reason, ids in by_reason.items():
        names = ", ".join(ids[:shown_ids]) + (
            f" and {len(ids) - shown_ids} more" if len(ids) > shown_ids else ""
        )
        out.append(f"{len(ids)} finished job{'' if len(ids) == 1 else 's'} run again: {reason} ({names})")
    return out


def _axes(jobs: Sequence[JobSpec]) -> list[str]:
    per_axis: dict[str, Counter[object]] = {}
    for job in jobs:
        for axis, value in job.matrix.items():
            # Scalars count as they are (fast for 200,000 jobs); tables by their JSON text.
            key = json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value
            counter = per_axis.get(axis)
            if counter is None:
                counter = per_axis[axis] = Counter()
            counter[key] += 1
    out = []
    for axis, counts in per_axis.items():
        low, high = min(counts.values()), max(counts.values())
        each = f"{low:,}" if low == high else f"{low:,}–{high:,}"
        shown = ", ".join(map(str, list(counts)[:3])) + (", …" if len(counts) > 3 else "")
        out.append(f"axis {axis}: {len(counts):,} values ({shown}) · {each} jobs each")
    return out
