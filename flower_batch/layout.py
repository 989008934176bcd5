"""Where a batch and its jobs live on the host: `volumes/<batch>/<job>/`.

    volumes/<batch>/batch.json         the batch: image id, gateway mode, jobs file (if any)
    volumes/<batch>/<job>/record.json  the job's record (jobmodel/record.py's format)
    volumes/<batch>/<job>/trajectory.json  its run in ATIF, written when it ends (export/)
    volumes/<batch>/<job>/workspace/   mounted at /workspace (the container's cwd)
    volumes/<batch>/<job>/runs/        mounted at /runs (run_dir; CLAUDE_CONFIG_DIR inside it)
    volumes/<batch>/<job>/flows/       the workflow's code, copied in; mounted read-only at /flows
    volumes/<batch>/<job>/logs/        container.log, check.log, gateway.jsonl

The fixed container paths are what keep lineage's workspace guard and the SDK's project_key
valid on every machine: `wake` works wherever the folder is.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flower.catalogue.names import MANIFEST_FILE

from .errors import FlowerBatchError, JobNotFound, RecordError
from .jobmodel.record import RECORD_NAME, JobRecord, read_record, record_path
from .untrusted_files import read_head

WORKSPACE = "/workspace"
RUNS = "/runs"
MANIFEST_CAP = 64 * 1024 * 1024  # a manifest row is a few hundred bytes: a million steps fit
FLOWS = "/flows"
FLOWER_PYTHON = "/opt/flower/bin/python"
"""flower's own Python in every container (the runtime image's, or the bundle mounted in a task's
image): called by its path, as a job's PATH leads to the image's own tools (running/bundle.py)."""
HOME_ENV = "FLOWER_BATCH_HOME"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def check_name(kind: str, name: str) -> str:
    if not _NAME.match(name):
        raise FlowerBatchError(
            f"{kind} name {name!r} is not usable: use letters, digits, '.', '_' or '-' (max 100)"
        )
    return name


COMPLETION_LIMIT = 200  # names a completion offers at most
SCAN_LIMIT = 20_000  # folder entries one completion reads at most, per folder


def _bounded_names(folder: Path, prefix: str, limit: int, holding: str | None = None) -> list[str]:
    """Sub-folders of `folder` named `prefix`... (usable names, no dot-folders), at most `limit`,
    reading at most SCAN_LIMIT entries; with `holding`, only those holding that file. Symlinks
    are not followed. Nothing readable: no names."""
    names: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for n, entry in enumerate(entries):
                if n >= SCAN_LIMIT or len(names) >= limit:
                    break
                if not entry.name.startswith(prefix) or not _NAME.match(entry.name):
                    continue
                if not entry.is_dir(follow_symlinks=False):
                    continue
                if holding is None or os.path.isfile(os.path.join(entry.path, holding)):
                    names.append(entry.name)
    except OSError:
        return []
    return sorted(names)


def home_root(flag: str | Path | None, environ: Mapping[str, str]) -> Path:
    """--home, else $FLOWER_BATCH_HOME (from the command's environment), else ./volumes."""
    return Path(flag if flag else environ.get(HOME_ENV, "") or "volumes").resolve()


@dataclass(frozen=True)
class JobDir:
    batch: str
    job: str
    root: Path

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def flows(self) -> Path:
        return self.root / "flows"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def record_path(self) -> Path:
        return self.root / RECORD_NAME

    @property
    def manifest_path(self) -> Path:
        return self.runs / MANIFEST_FILE

    def make(self) -> JobDir:
        for d in (self.workspace, self.runs, self.flows, self.logs):
            d.mkdir(parents=True, exist_ok=True)
        return self

    def record(self) -> JobRecord:
        return read_record(self.record_path)

    def manifest(self) -> list[dict[str, Any]]:
        """runs/manifest.json's rows; the job wrote it, so read capped and through no symlink."""
        try:
            found = read_head(self.root, f"runs/{MANIFEST_FILE}", MANIFEST_CAP)
            rows = json.loads(found.data) if not found.cut else None
        except (OSError, ValueError):
            return []
        return rows if isinstance(rows, list) else []


class Home:
    """The root of all batches (the command line chooses it: `home_root`)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def batch_dir(self, batch: str) -> Path:
        return self.root / check_name("batch", batch)

    def job(self, batch: str, job: str) -> JobDir:
        return JobDir(batch, check_name("job", job), self.batch_dir(batch) / job)

    def batches(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    def batch_names(self, prefix: str = "", limit: int = COMPLETION_LIMIT) -> list[str]:
        """Batch names starting with `prefix`, at most `limit`: for shell completion, from a
        bounded scan (a home of 200,000 jobs answers as fast as one of ten)."""
        return _bounded_names(self.root, prefix, limit)

    def job_refs(self, prefix: str = "", limit: int = COMPLETION_LIMIT) -> list[str]:
        """Job references starting with `prefix`, at most `limit`, for shell completion: job ids
        of every batch, or `batch/job` once the prefix names the batch. Bounded scans only; a
        folder counts as a job when it holds a record."""
        if "/" in prefix:
            batch, _, start = prefix.partition("/")
            if not _NAME.match(batch):
                return []
            jobs = _bounded_names(self.root / batch, start, limit, holding=RECORD_NAME)
            return [f"{batch}/{job}" for job in jobs]
        refs: list[str] = []
        for batch in _bounded_names(self.root, "", limit):
            refs += _bounded_names(self.root / batch, prefix, limit - len(refs), holding=RECORD_NAME)
            if len(refs) >= limit:
                break
        return sorted(set(refs))

    def jobs(self, batch: str | None = None) -> list[JobDir]:
        out = []
        for b in [batch] if batch else self.batches():
            bdir = self.batch_dir(b)
            if bdir.is_dir():
                out += [JobDir(b, p.parent.name, p.parent) for p in sorted(bdir.glob(f"*/{RECORD_NAME}"))]
        return out

    def find(self, ref: str) -> JobDir:
        """A job by `batch/job` or by a job id unique across batches."""
        if "/" in ref:
            batch, job = ref.split("/", 1)
            jd = self.job(batch, job)
            if jd.record_path.exists():
                return jd
            raise JobNotFound(f"no job {ref} under {self.root} (see `flower-batch ls`)")
        hits = [jd for jd in self.jobs() if jd.job == ref]
        if not hits:
            raise JobNotFound(f"no job named {ref} under {self.root} (see `flower-batch ls`)")
        if len(hits) > 1:
            names = ", ".join(f"{h.batch}/{h.job}" for h in hits)
            raise JobNotFound(f"job {ref} exists in several batches ({names}): name it as batch/job")
        return hits[0]

    def records(self, batch: str | None = None) -> list[tuple[JobDir, JobRecord | RecordError]]:
        out: list[tuple[JobDir, JobRecord | RecordError]] = []
        for jd in self.jobs(batch):
            try:
                out.append((jd, read_record(record_path(jd.root.parent, jd.job))))
            except RecordError as exc:
                out.append((jd, exc))
        return out
