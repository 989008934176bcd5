"""Earlier attempts of a job, kept: `<job>/attempts/<n>/`.

Re-running a job (the default re-run of error/skipped jobs, --retry-failed, --fresh) gives it a
fresh workspace and runs folder. The previous attempt is not deleted: its record, runs/
(manifest.json, sessions.db, the CLI's transcripts), logs/, flows/, trajectory.json and the workspace it
changed move to `<job>/attempts/<n>/` (n = that attempt's number), as one folder that looks
like a job folder, so `show`, `repro --attempt N` and people can read it the same way.
The move happens when the new attempt really starts (run_job), never at planning time: a
pre-flight failure or a Ctrl-C before the job starts leaves the old attempt where it was.
Only `gc --attempts` removes them.

The folders move by rename (nothing inside is opened or followed, a FIFO included); the files
copied beside them (the record, the scenario copy) are read through flower_batch/untrusted_files.py, so a
symlink or a FIFO put in their place is never followed or opened.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flower_batch.errors import FlowerBatchError, RecordError
from flower_batch.export.trajectory_file import TRAJECTORY_NAME
from flower_batch.jobmodel.record import RECORD_NAME, JobRecord, read_record, write_record
from flower_batch.layout import JobDir
from flower_batch.running.disk_ops import AS_ROOT, DiskOps
from flower_batch.running.job_disk import recover_live
from flower_batch.untrusted_files import copy_file

ATTEMPTS = "attempts"
# record.json is handled on its own; trajectory.json is the host's file, derived from runs/
_MOVED = ("workspace", "runs", "logs", "flows", TRAJECTORY_NAME)


def attempts_dir(jd: JobDir) -> Path:
    return jd.root / ATTEMPTS


def attempt_dir(jd: JobDir, n: int) -> JobDir:
    """Attempt `n` of a job, as a JobDir (its record, manifest, logs, workspace)."""
    return JobDir(jd.batch, jd.job, attempts_dir(jd) / str(n))


def attempt_numbers(jd: JobDir) -> list[int]:
    root = attempts_dir(jd)
    if not root.is_dir():
        return []
    return sorted(int(p.name) for p in root.iterdir() if p.name.isdigit() and _is_real_dir(p))


def _is_real_dir(path: Path) -> bool:
    """A directory itself, not a symlink to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _record_is_this_run(jd: JobDir, attempt: int) -> bool:
    """The record on disk is the new attempt's own (queued, running or ended by this run)."""
    try:
        record = jd.record()
    except (FileNotFoundError, RecordError):
        return False
    return record.attempt == attempt


def keep_previous_attempt(
    jd: JobDir, previous: JobRecord | None, attempt: int, ops: DiskOps = AS_ROOT
) -> Path | None:
    """Move what the job folder holds of an earlier attempt into attempts/<n>/ (None: nothing to keep).

    `previous` is the earlier attempt's record as the planner read it (the file may already
    have been replaced by this run's `queued` record); `attempt` is the new attempt's number.
    `ops`: how a killed run's disk still shown in its folders is let go of (running/disk_ops.py).
    """
    recover_live(jd, ops)  # a killed run's folders still showing its disk: its files first, unbound
    present = [name for name in _MOVED if os.path.lexists(jd.root / name)]  # a symlink moves as one
    record_on_disk = os.path.lexists(jd.record_path) and not _record_is_this_run(jd, attempt)
    if not present and not record_on_disk:
        return None  # nothing of an earlier attempt is here (a first run, or one that never started)
    numbers = attempt_numbers(jd)
    n = (
        previous.attempt
        if previous is not None and previous.attempt not in numbers
        else max([0, *numbers]) + 1
    )
    dest = attempts_dir(jd) / str(n)
    try:
        dest.mkdir(parents=True)
        # The record first: if a move below fails, the attempt still says what it was.
        if record_on_disk:
            copy_file(jd.root, RECORD_NAME, dest / RECORD_NAME)  # the live record is replaced next
        elif previous is not None:
            write_record(dest / RECORD_NAME, previous)
        for name in present:
            os.replace(jd.root / name, dest / name)
        for copy in jd.root.glob("scenario.*"):
            copy_file(jd.root, copy.name, dest / copy.name)
    except OSError as exc:
        raise FlowerBatchError(
            f"job {jd.batch}/{jd.job}: could not keep its previous attempt in {dest}: {exc}"
        ) from exc
    return dest


@dataclass(frozen=True)
class Attempt:
    number: int
    folder: Path
    record: JobRecord | None
    problem: str | None = None  # why the record could not be read

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"attempt": self.number, "folder": str(self.folder)}
        if self.record is not None:
            r = self.record
            data.update(
                status=r.status,
                reason=r.reason,
                started_at=r.started_at,
                finished_at=r.finished_at,
                cost_usd=r.cost_usd,
                duration_s=r.duration_s,
                image_id=r.image_id,
            )
        else:
            data.update(status="unreadable", reason=self.problem)
        return data


def list_attempts(jd: JobDir) -> list[Attempt]:
    out = []
    for n in attempt_numbers(jd):
        folder = attempt_dir(jd, n)
        try:
            out.append(Attempt(n, folder.root, read_record(folder.record_path)))
        except FileNotFoundError:
            out.append(Attempt(n, folder.root, None, "no record.json"))
        except RecordError as exc:
            out.append(Attempt(n, folder.root, None, str(exc)))
    return out


def prunable(jd: JobDir, keep: int) -> list[Path]:
    """The attempt folders `gc --attempts --keep KEEP` removes: all but the newest KEEP."""
    numbers = attempt_numbers(jd)
    doomed = numbers[: max(0, len(numbers) - keep)]
    return [attempts_dir(jd) / str(n) for n in doomed]
