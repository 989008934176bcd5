"""record.json: the durable record of one job in a batch folder.

Layout: `<batch_dir>/<job_id>/record.json`. The runner writes it when the job is queued
or started (status "queued"/"running") and again when it ends; every write is atomic
(temp file + fsync + rename), so a crash leaves the previous complete record, never a
truncated one. Secrets never appear: the spec lists secret NAMES only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from flower.fileio import write_atomic
from flower_batch.errors import RecordError, no_space

from .classes import FailureClass, parse_class
from .grading import Reward
from .image import PinnedImage
from .modes import DEFAULT_MODE, GatewayMode, parse_mode
from .outcome import JobOutcome, StepSummary
from .pausing import read_history
from .spec import JobSpec
from .status import Status, parse_status

RECORD_FORMAT = "flower-batch/job-record@1"
RECORD_NAME = "record.json"
CHECK_OUTPUT_LIMIT = 8000


@dataclass(frozen=True)
class JobRecord:
    """Fields of record.json (see docs/jobs-toml.md, "Job records"), typed: a record read from
    disk is checked once here, and nothing above jobmodel reads the raw JSON."""

    job_id: str
    batch: str
    inputs_hash: str
    image_id: str
    status: Status
    spec: JobSpec
    gateway_mode: GatewayMode = DEFAULT_MODE
    attempt: int = 1
    reason: str | None = None
    exit_code: int | None = None
    workflow_ok: bool | None = None
    check_exit: int | None = None
    check_output: str | None = None
    cost_usd: float | None = None
    num_turns: int | None = None
    steps: tuple[StepSummary, ...] = ()
    queued_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    container: str | None = None
    node: str | None = None  # the machine that ran the job (a cluster node); None on a local engine
    backend: str | None = None  # docker | swarm
    versions: dict[str, str] = field(default_factory=dict)
    failure_class: FailureClass | None = None  # see jobmodel/classes.py; None while in flight
    # Per step: continued its session or started fresh, and why (flower's runs/continuity.json).
    continuity: tuple[dict[str, Any], ...] = ()
    session: str | None = None  # the orchestrator session that wrote it (liveness: is it still there?)
    gateway_health: dict[str, Any] | None = None  # gateway deaths and restarts while the job ran
    # Persistent jobs: per attempt, its caps and the spend metered (jobmodel/pausing.py).
    budget_history: tuple[dict[str, Any], ...] = ()
    reward: Reward | None = None
    """What the job's hidden tests wrote (grading.py); None: no verifier, or nothing valid."""
    state_image: str | None = None
    """A writable-root job's container committed when it ended (running/state_image.py): its id,
    what `wake` runs from and `gc --images` removes."""
    sandbox: str | None = None
    """How a job that asked for more than the sandbox ran (running/job_root.py): its root, its
    uid and what that uid is on the host."""

    def __post_init__(self) -> None:
        # Words from a caller: the enums, or ValueError (from_dict checks a file's words first).
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "gateway_mode", GatewayMode(self.gateway_mode))
        if self.failure_class is not None:
            object.__setattr__(self, "failure_class", FailureClass(self.failure_class))

    @property
    def finished(self) -> bool:
        return self.status.ended

    @property
    def image(self) -> PinnedImage:
        """The image it ran on, pinned, with the versions inside it."""
        return PinnedImage(self.image_id, dict(self.versions))

    @property
    def persistent(self) -> bool:
        return self.spec.persistent

    @property
    def budget_usd(self) -> float | None:
        """The job's own cap at its last attempt (None: no cap of its own)."""
        return self.spec.budget_usd

    def with_outcome(self, outcome: JobOutcome, **timings: Any) -> JobRecord:
        """This record, finished with `outcome` (timings: finished_at=..., exit_code=...)."""
        check_output = outcome.check_output[-CHECK_OUTPUT_LIMIT:] if outcome.check_output else None
        return replace(
            self,
            status=outcome.status,
            reason=outcome.reason,
            workflow_ok=outcome.workflow_ok,
            check_exit=outcome.check_exit,
            check_output=check_output,
            cost_usd=outcome.cost_usd,
            num_turns=outcome.num_turns,
            steps=outcome.steps,
            duration_s=outcome.duration_s,
            gateway_mode=outcome.gateway_mode,
            failure_class=outcome.klass,
            reward=outcome.reward,
            **timings,
        )

    def outcome(self, log_tail: str | None = None) -> JobOutcome | None:
        """The job's outcome for reports; None while it is queued or running."""
        if not self.finished:
            return None
        return JobOutcome(
            job_id=self.job_id,
            status=self.status,
            workflow_ok=self.workflow_ok,
            check_exit=self.check_exit,
            cost_usd=self.cost_usd,
            num_turns=self.num_turns,
            duration_s=self.duration_s,
            steps=self.steps,
            gateway_mode=self.gateway_mode,
            reason=self.reason,
            check_output=self.check_output,
            log_tail=log_tail,
            failure_class=self.failure_class.value if self.failure_class else None,
            reward=self.reward,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": RECORD_FORMAT,
            "job_id": self.job_id,
            "batch": self.batch,
            "status": self.status.value,
            "class": self.failure_class.value if self.failure_class else None,
            "reason": self.reason,
            "inputs_hash": self.inputs_hash,
            "image_id": self.image_id,
            "gateway_mode": self.gateway_mode.value,
            "attempt": self.attempt,
            "exit_code": self.exit_code,
            "workflow_ok": self.workflow_ok,
            "check_exit": self.check_exit,
            "check_output": self.check_output,
            "cost_usd": self.cost_usd,
            "num_turns": self.num_turns,
            "steps": [s.to_dict() for s in self.steps],
            "queued_at": self.queued_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "duration_s": self.duration_s,
            "container": self.container,
            "node": self.node,
            "backend": self.backend,
            "versions": self.versions,
            "continuity": [dict(e) for e in self.continuity],
            "session": self.session,
            "gateway_health": self.gateway_health,
            **({"budget_history": [dict(e) for e in self.budget_history]} if self.budget_history else {}),
            **({"reward": self.reward.to_dict()} if self.reward else {}),
            **({"state_image": self.state_image} if self.state_image else {}),
            **({"sandbox": self.sandbox} if self.sandbox else {}),
            "spec": self.spec.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobRecord:
        """Raises RecordError on a missing required field, an unknown status or gateway mode, or
        a spec that is not a job's. Every earlier format reads (tests/flower_batch/jobmodel/
        test_record_formats.py holds one record of each)."""
        status = _required(data)
        mode = parse_mode(data.get("gateway_mode") or DEFAULT_MODE.value)
        if mode is None:
            raise RecordError(f"unknown gateway mode {data.get('gateway_mode')!r}")
        if not isinstance(data.get("spec"), Mapping):
            raise RecordError("missing field `spec` (the job's inputs)")
        try:
            return cls(
                job_id=data["job_id"],
                batch=data["batch"],
                inputs_hash=data["inputs_hash"],
                image_id=data["image_id"],
                status=status,
                spec=JobSpec.from_dict(dict(data["spec"])),
                gateway_mode=mode,
                attempt=int(data.get("attempt") or 1),
                reason=data.get("reason"),
                exit_code=data.get("exit_code"),
                workflow_ok=data.get("workflow_ok"),
                check_exit=data.get("check_exit"),
                check_output=data.get("check_output"),
                cost_usd=data.get("cost_usd"),
                num_turns=data.get("num_turns"),
                steps=tuple(StepSummary.from_dict(s) for s in data.get("steps") or ()),
                queued_at=data.get("queued_at"),
                started_at=data.get("started_at"),
                finished_at=data.get("finished_at"),
                duration_s=data.get("duration_s"),
                container=data.get("container"),
                node=data.get("node"),
                backend=data.get("backend"),
                versions=dict(data.get("versions") or {}),
                failure_class=parse_class(data.get("class")),
                continuity=tuple(dict(e) for e in data.get("continuity") or () if isinstance(e, Mapping)),
                session=data.get("session") if isinstance(data.get("session"), str) else None,
                gateway_health=dict(data["gateway_health"])
                if isinstance(data.get("gateway_health"), dict)
                else None,
                budget_history=read_history(data.get("budget_history")),
                reward=Reward.from_dict(data["reward"]) if isinstance(data.get("reward"), Mapping) else None,
                state_image=data.get("state_image"),
                sandbox=data.get("sandbox"),
            )
        except KeyError as exc:
            raise RecordError(f"malformed field `spec`: no {exc}") from exc
        except (TypeError, ValueError, AttributeError) as exc:
            raise RecordError(f"malformed field: {exc}") from exc


def _required(data: object) -> Status:
    """The checks every reading of a record makes (a full one, a list's light one): its status."""
    if not isinstance(data, Mapping):
        raise RecordError("not a JSON object")
    for key in ("job_id", "batch", "inputs_hash", "image_id", "status"):
        if not isinstance(data.get(key), str):
            raise RecordError(f"missing or non-text field `{key}`")
    status = parse_status(data["status"])
    if status is None:
        raise RecordError(f"unknown status {data['status']!r}")
    return status


@dataclass(frozen=True)
class RecordHead:
    """What a list of jobs shows of a record, read without building the whole record: its steps
    are most of the cost of parsing thousands (the viewer polls 5,000-job batches). The required
    fields are checked as `JobRecord.from_dict` checks them; the others are taken as they are."""

    job_id: str
    status: Status
    task: str
    variant: str
    repeat: object
    matrix: Mapping[str, object]
    steps: int
    shown: Mapping[str, object]
    """cost_usd, num_turns, duration_s, reason, attempt, started_at, finished_at, gateway_mode,
    reward (a graded job's {"value", "detail"}, else None)."""

    SHOWN = (
        "cost_usd",
        "num_turns",
        "duration_s",
        "reason",
        "attempt",
        "started_at",
        "finished_at",
        "gateway_mode",
        "reward",
    )

    @classmethod
    def from_dict(cls, data: object) -> RecordHead:
        """Raises RecordError as JobRecord.from_dict does for a missing field or unknown status."""
        status = _required(data)
        assert isinstance(data, Mapping)  # checked by _required
        given = data.get("spec")
        spec: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        matrix = spec.get("matrix")
        return cls(
            job_id=data["job_id"],
            status=status,
            task=str(spec.get("task") or ""),
            variant=str(spec.get("variant") or ""),
            repeat=spec.get("repeat"),
            matrix=matrix if isinstance(matrix, Mapping) else {},
            steps=len(data.get("steps") or ()),
            shown={k: data.get(k) for k in cls.SHOWN},
        )


def record_path(batch_dir: Path, job_id: str) -> Path:
    return Path(batch_dir) / job_id / RECORD_NAME


ROOM_NAME = ".record-room"
ROOM_BYTES = 64 * 1024
"""Space held beside a running job's record, given up for its last record when the disk is full:
a record never stays 'running' because its orchestrator found no room to say how it ended."""


def write_record(path: Path, record: JobRecord) -> None:
    """Atomically replace `path` with `record` (temp file in the same folder, fsync, rename). On a
    full disk the previous record stays whole; the job's room (ROOM_NAME) is given up for this
    one and the write tried once more. A running record holds room for its end."""
    text = json.dumps(record.to_dict(), indent=2, ensure_ascii=False) + "\n"
    room = path.parent / ROOM_NAME
    try:
        write_atomic(path, text)
    except OSError as exc:
        if not no_space(exc) or not room.exists():
            raise
        room.unlink()
        write_atomic(path, text)
    if record.status is Status.RUNNING:
        _hold_room(room)
    elif record.status.ended:
        room.unlink(missing_ok=True)


def _hold_room(room: Path) -> None:
    """ROOM_BYTES really written (not a sparse file), or nothing when the disk has no room left."""
    if room.exists():
        return
    try:
        with open(room, "wb") as f:
            f.write(b"\0" * ROOM_BYTES)
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        room.unlink(missing_ok=True)


def read_record(path: Path) -> JobRecord:
    """Raises FileNotFoundError if absent, RecordError if unreadable or malformed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(f"{path}: {exc}") from exc
    try:
        return JobRecord.from_dict(data)
    except RecordError as exc:
        raise RecordError(f"{path}: {exc}") from exc


def load_records(batch_dir: Path, job_ids: Iterable[str] | None = None) -> dict[str, JobRecord | RecordError]:
    """Records found in a batch folder, by job id; unreadable ones as their RecordError.

    With `job_ids`, only those are looked up; otherwise every `<dir>/record.json`.
    """
    batch_dir = Path(batch_dir)
    if job_ids is None:
        job_ids = sorted(p.parent.name for p in batch_dir.glob(f"*/{RECORD_NAME}"))
    found: dict[str, JobRecord | RecordError] = {}
    # One listing instead of a failed lookup per job: a 200,000-job plan on an empty batch is instant.
    present = {p.name for p in batch_dir.iterdir()} if batch_dir.is_dir() else set()
    for job_id in job_ids:
        if job_id not in present:
            continue
        try:
            found[job_id] = read_record(record_path(batch_dir, job_id))
        except FileNotFoundError:
            continue
        except RecordError as exc:
            found[job_id] = exc
    return found


def new_record(
    job: JobSpec, *, batch: str, image_id: str, status: Status = Status.QUEUED, **fields: Any
) -> JobRecord:
    """A record for `job` before it runs; `fields` sets any other JobRecord field."""
    return JobRecord(
        job_id=job.id,
        batch=batch,
        inputs_hash=job.inputs_hash(image_id),
        image_id=image_id,
        status=status,
        spec=job,
        gateway_mode=job.gateway.mode,
        **fields,
    )
