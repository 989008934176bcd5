"""`<job>/trajectory.json`: the job's ATIF trajectory, beside its record.json.

The job folder itself is the host's (the container sees only workspace/, runs/, flows/ and logs/),
so the file is written there atomically; what it is made of is read bounded and through no symlink
(flower_batch/transcripts/)."""

from __future__ import annotations

import json
from pathlib import Path

from flower.fileio import write_atomic
from flower_batch.jobmodel.record import JobRecord
from flower_batch.layout import JobDir

from .atif import job_atif

TRAJECTORY_NAME = "trajectory.json"


def write_trajectory(jd: JobDir, record: JobRecord | None = None, dest: Path | None = None) -> Path:
    """Write the job's ATIF trajectory to `dest` (default `<job>/trajectory.json`); returns it."""
    path = dest or jd.root / TRAJECTORY_NAME
    write_atomic(path, json.dumps(job_atif(jd, record), ensure_ascii=False, indent=1) + "\n")
    return path
