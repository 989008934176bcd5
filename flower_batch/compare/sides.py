"""One side of a comparison: a batch's results.json, read back into per-job rows.

A side is named on the command line as a batch (a folder under the home, whose
`report/results.json` is read), or as a path: a results.json, a batch folder or a report
folder. The results.json shape is `flower-batch/results@1` (flower_batch/reports/_results.py).
Anything unusable is a `SideError`: one line naming the file and the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flower_batch.errors import SideError
from flower_batch.jobmodel.status import Status
from flower_batch.layout import Home
from flower_batch.reports import RESULTS_FORMAT

RESULTS_NAME = "results.json"
# Statuses that are not a measurement: left out of n, as the batch's own table does.
NOT_COUNTED = frozenset({"pending", "skipped", "paused"})


@dataclass(frozen=True)
class JobRow:
    """What the comparison needs of one job entry of results.json."""

    task: str
    variant: str
    status: str
    failure_class: str
    cost_usd: float | None
    num_turns: float | None
    duration_s: float | None
    reward: float | None = None
    """The verifier's reward of a graded job (a Harbor task); None: no verifier, or none written."""

    @property
    def counted(self) -> bool:
        return self.status not in NOT_COUNTED

    @property
    def passed(self) -> bool:
        return self.status == Status.PASSED


@dataclass(frozen=True)
class Side:
    label: str  # how outputs name this side: the batch, else the file
    source: str  # where it was read from
    gateway_label: str
    generated_at: str | None
    jobs: tuple[JobRow, ...]


def resolve(ref: str, home: Home) -> Path:
    """The results.json a command-line side names (a batch under `home` wins over a path)."""
    batch_dir = home.root / ref
    if "/" not in ref and ref not in (".", "..") and batch_dir.is_dir():
        path = batch_dir / "report" / RESULTS_NAME
        if not path.is_file():
            raise SideError(
                f"batch {ref} has no report/{RESULTS_NAME} yet: run `flower-batch report {ref}` first"
            )
        return path
    path = Path(ref)
    for candidate in (path, path / RESULTS_NAME, path / "report" / RESULTS_NAME):
        if candidate.is_file():
            return candidate
    raise SideError(
        f"{ref}: neither a batch under {home.root} nor a results.json (give a batch name, "
        "or the path of a results.json from a report folder or a CI artifact)"
    )


def load_side(ref: str, home: Home) -> Side:
    path = resolve(ref, home)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SideError(f"{path}: cannot be read ({exc})") from None
    except ValueError as exc:
        raise SideError(f"{path}: not JSON ({exc})") from None
    return side_from_document(document, source=str(path))


def side_from_document(document: Any, *, source: str) -> Side:
    """A side from a results.json document (also the in-memory one of a matrix just run)."""
    if not isinstance(document, Mapping):
        raise SideError(f"{source}: expected a results.json object, got {type(document).__name__}")
    if document.get("format") != RESULTS_FORMAT:
        raise SideError(
            f"{source}: field format is {document.get('format')!r}, expected {RESULTS_FORMAT!r} "
            "(a results.json written by `flower-batch matrix` or `report`)"
        )
    jobs = document.get("jobs")
    if not isinstance(jobs, list):
        raise SideError(f"{source}: field jobs must be a list of job entries")
    rows = tuple(_row(entry, f"{source}: jobs[{i}]") for i, entry in enumerate(jobs))
    gateway = document.get("gateway")
    label = gateway.get("label") if isinstance(gateway, Mapping) else None
    batch = document.get("batch")
    return Side(
        label=batch if isinstance(batch, str) and batch else source,
        source=source,
        gateway_label=label if isinstance(label, str) else "unknown model",
        generated_at=document.get("generated_at") if isinstance(document.get("generated_at"), str) else None,
        jobs=rows,
    )


def _row(entry: Any, where: str) -> JobRow:
    if not isinstance(entry, Mapping):
        raise SideError(f"{where}: expected an object with task, variant and status")
    for name in ("task", "variant", "status"):
        if not isinstance(entry.get(name), str) or not entry.get(name):
            raise SideError(f"{where}: field {name} must be a non-empty string")
    outcome = entry.get("outcome")
    outcome = outcome if isinstance(outcome, Mapping) else {}
    return JobRow(
        task=entry["task"],
        variant=entry["variant"],
        status=entry["status"],
        failure_class=failure_class(entry, outcome),
        cost_usd=_number(outcome.get("cost_usd")),
        num_turns=_number(outcome.get("num_turns")),
        duration_s=_number(outcome.get("duration_s")),
        reward=_number(entry.get("reward")),
    )


def failure_class(entry: Mapping[str, Any], outcome: Mapping[str, Any]) -> str:
    """The job's class: its own `class` field when results.json has one, else read off its status.

    Without the field a failed job is `agent` when the workflow reported failure and `verifier`
    when the workflow succeeded but the check did not; other statuses keep their name.
    """
    given = entry.get("class")
    if isinstance(given, str) and given:
        return given
    status = str(entry["status"])
    if status != Status.FAILED:
        return status
    if outcome.get("workflow_ok") is False:
        return "agent"
    check_exit = outcome.get("check_exit")
    if isinstance(check_exit, int) and check_exit != 0:
        return "verifier"
    return "failed"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
