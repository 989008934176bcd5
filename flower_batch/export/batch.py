"""A whole batch in ATIF or Inspect form: what `flower-batch export` does.

    atif     every job's trajectory: `<job>/trajectory.json` in the batch (refreshed), or
             `<out>/<job>/trajectory.json` with --out (the batch folder's own layout)
    inspect  one eval log per task x variant (inspect_log.py says why): `<batch>/report/inspect/`,
             or --out

Jobs are read one at a time (a batch can be large); `progress(done, total, job)` is called after
each. A job whose files cannot be read is reported in `problems` and the rest go on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from flower.fileio import write_atomic
from flower_batch.errors import FlowerBatchError
from flower_batch.jobmodel.record import JobRecord
from flower_batch.layout import Home, JobDir

from .atif import job_atif
from .inspect_log import CellJob, cell_of, eval_log, file_name
from .trajectory_file import TRAJECTORY_NAME, write_trajectory

FORMATS = ("atif", "inspect")
INSPECT_DIR = ("report", "inspect")

Progress = Callable[[int, int, str], None]


@dataclass
class Exported:
    folder: Path
    files: list[Path] = field(default_factory=list)
    jobs: int = 0
    skipped: int = 0  # jobs not in the files: unreadable, or (Inspect) not finished
    problems: list[str] = field(default_factory=list)


def out_folder(home: Home, batch: str, fmt: str, out: Path | None) -> Path:
    """Where the files go, checked before any job is read (one-line errors)."""
    if fmt not in FORMATS:
        raise FlowerBatchError(f"--format {fmt!r} is not one of: {', '.join(FORMATS)}")
    bdir = home.batch_dir(batch)
    if not bdir.is_dir():
        raise FlowerBatchError(f"no batch {batch!r} under {home.root} (see `flower-batch ls`)")
    if out is None:
        return bdir.joinpath(*INSPECT_DIR) if fmt == "inspect" else bdir
    out = out.expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise FlowerBatchError(f"--out {out} is a file: give a folder")
    if not out.parent.is_dir():
        raise FlowerBatchError(f"--out {out}: its parent folder {out.parent} does not exist")
    return out


def export_batch(
    home: Home, batch: str, fmt: str, out: Path | None = None, progress: Progress | None = None
) -> Exported:
    folder = out_folder(home, batch, fmt, out)
    jobs = home.jobs(batch)
    done = Exported(folder)
    if fmt == "atif":
        _atif(jobs, folder if out is not None else None, done, progress)
    else:
        _inspect(batch, jobs, folder, done, progress)
    return done


def _record(jd: JobDir, done: Exported) -> JobRecord | None:
    try:
        return jd.record()
    except (OSError, FlowerBatchError) as exc:
        done.problems.append(f"{jd.job}: record.json not readable ({exc})")
        return None


def _atif(jobs: list[JobDir], out: Path | None, done: Exported, progress: Progress | None) -> None:
    for n, jd in enumerate(jobs, start=1):
        record = _record(jd, done)
        try:
            if out is None:
                done.files.append(write_trajectory(jd, record))
            else:
                (out / jd.job).mkdir(parents=True, exist_ok=True)
                done.files.append(write_trajectory(jd, record, out / jd.job / TRAJECTORY_NAME))
            done.jobs += 1
        except (OSError, ValueError) as exc:
            done.skipped += 1
            done.problems.append(f"{jd.job}: trajectory not written ({exc})")
        if progress:
            progress(n, len(jobs), jd.job)


def _inspect(batch: str, jobs: list[JobDir], out: Path, done: Exported, progress: Progress | None) -> None:
    cells: dict[tuple[str, str], list[CellJob]] = {}
    unfinished: dict[tuple[str, str], int] = {}
    for n, jd in enumerate(jobs, start=1):
        record = _record(jd, done)
        if record is None:
            done.skipped += 1
        elif not record.finished:
            unfinished[cell_of(record)] = unfinished.get(cell_of(record), 0) + 1
            done.skipped += 1
        else:
            # Only the log's own data is kept per job: the trajectory dict, not the db.
            cells.setdefault(cell_of(record), []).append(CellJob(record, job_atif(jd, record)))
            done.jobs += 1
        if progress:
            progress(n, len(jobs), jd.job)
    out.mkdir(parents=True, exist_ok=True)
    for task, variant in sorted(set(cells) | set(unfinished)):
        log = eval_log(
            batch, task, variant, cells.get((task, variant), []), unfinished.get((task, variant), 0)
        )
        path = out / file_name(log)
        write_atomic(path, json.dumps(log, ensure_ascii=False, indent=1) + "\n")
        done.files.append(path)
