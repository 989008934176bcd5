"""One Inspect AI eval log (the `.json` form `read_eval_log` and `inspect view` read) per task x
variant of a batch.

Why per task x variant, not one per batch: an Inspect eval log is one task run by one model
configuration, and `inspect eval-set` over tasks x models writes exactly one log per pair. A
flower-batch cell (task x variant) is that pair, so each log's headline accuracy is the cell's
pass rate, `evals_df` gets one row per cell, and Inspect's epochs mean what our repeats mean. One
log per batch would average different variants into one headline.

In each log: the task is the one sample (id = the task's name), each job of the cell is that
sample at epoch = its repeat; the score `flower_batch` is C (passed) or I (not), with the status,
the failure class and the reason, or, for a job its verifier graded (a Harbor task), the reward
itself as the score's value (the pass beside it in the metadata; the cell's mean reward is the
score's `mean` metric and the sample's reduction); the messages are the job's transcript (inspect_messages.py),
with model usage and cost. An infrastructure failure also carries Inspect's sample `error`: no
verdict was reached. Jobs still queued or running are left out and the log's status is `started`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flower.clock import now_iso
from flower_batch import __version__
from flower_batch.harbor.shown import harbor_facts
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.status import Status

from .classes import failure_class
from .inspect_messages import messages, model_usage

SCORER = "flower_batch"
LOG_VERSION = 2


@dataclass(frozen=True)
class CellJob:
    """One finished job of a cell: its record and its ATIF trajectory."""

    record: JobRecord
    trajectory: Mapping[str, Any]


def cell_of(record: JobRecord) -> tuple[str, str]:
    """(task, variant) of a job; a job outside a matrix is its own task, variant `default`."""
    return record.spec.task or record.job_id, record.spec.variant or "default"


def file_name(log: Mapping[str, Any]) -> str:
    """`<created>_<task>-<variant>_<eval id>.json`: Inspect lists a `.json` log only when its name
    starts with the timestamp, and reads the task from the part after it (no `_` inside)."""
    created = str(log["eval"]["created"])[:19].replace(":", "-")
    cell = f"{log['eval']['task']}-{log['eval']['metadata']['variant']}".replace("_", "-")
    return f"{created}_{cell}_{log['eval']['eval_id']}.json"


def eval_log(batch: str, task: str, variant: str, jobs: Sequence[CellJob], unfinished: int) -> dict[str, Any]:
    """The eval log of one cell: `jobs` finished, `unfinished` more still queued or running."""
    ordered = sorted(jobs, key=lambda j: _repeat(j.record))
    samples = [_sample(task, j, epoch) for epoch, j in _epochs(ordered)]
    first = ordered[0].record if ordered else None
    workflow = first.spec.workflow if first else None
    times = [j.record.started_at or j.record.queued_at for j in ordered]
    created = min([t for t in times if t] or [now_iso()])  # no job finished yet: now
    ends = [j.record.finished_at for j in ordered if j.record.finished_at]
    usage = _sum_usage([s["model_usage"] for s in samples])
    passed = sum(1 for j in ordered if j.record.status is Status.PASSED)
    rewards = [j.record.reward.value for j in ordered if j.record.reward is not None]
    versions = first.versions if first else {}
    return {
        "version": LOG_VERSION,
        "status": "started" if unfinished else "success",
        "eval": {
            "eval_set_id": batch,
            "eval_id": hashlib.sha256(f"{batch}/{task}/{variant}".encode()).hexdigest()[:22],
            "run_id": batch,
            "created": created,
            "task": task,
            "task_id": f"{task}-{variant}",
            "task_version": 0,
            "task_display_name": f"{task} · {variant}",
            "task_args": {"variant": variant},
            "solver": workflow,
            "dataset": {"name": task, "samples": 1, "sample_ids": [task]},
            "model": (first.spec.model if first else None) or next(iter(usage), "unknown"),
            "config": {"epochs": max([s["epoch"] for s in samples] or [1])},
            "packages": {
                "flower-batch": versions.get("flower_batch") or __version__,
                **({"claude-agent-sdk": versions["sdk"]} if versions.get("sdk") else {}),
            },
            "metadata": {"batch": batch, "variant": variant, "workflow": workflow},
        },
        "plan": {"name": "plan", "steps": [{"solver": workflow or "flower", "params": {}}]},
        "results": _results(len(samples), unfinished, passed, rewards),
        "stats": {"started_at": created, "completed_at": max(ends) if ends else "", "model_usage": usage},
        "samples": samples,
        "reductions": [
            {
                "scorer": SCORER,
                "reducer": "mean",
                "samples": [
                    {"value": _mean(rewards) if rewards else _rate(passed, samples), "sample_id": task}
                ],
            }
        ],
    }


def _rate(passed: int, samples: Sequence[Any]) -> float:
    return passed / len(samples) if samples else 0.0


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _results(scored: int, unfinished: int, passed: int, rewards: Sequence[float] = ()) -> dict[str, Any]:
    """Inspect's results: the cell's pass rate as the `accuracy` of the `flower_batch` score, and
    the mean reward as its `mean` where a verifier graded jobs."""
    rate = passed / scored if scored else 0.0
    mean = {"mean": {"name": "mean", "value": _mean(rewards)}} if rewards else {}
    return {
        "total_samples": scored + unfinished,
        "completed_samples": scored,
        "scores": [
            {
                "name": SCORER,
                "scorer": SCORER,
                "reducer": "mean",
                "scored_samples": scored,
                "metrics": {"accuracy": {"name": "accuracy", "value": rate}, **mean},
            }
        ],
    }


def _repeat(record: JobRecord) -> int:
    return record.spec.repeat if record.spec.repeat > 0 else 1


def _epochs(jobs: Sequence[CellJob]) -> list[tuple[int, CellJob]]:
    """Each job's epoch: its repeat, or the next free number when two jobs share one."""
    taken: set[int] = set()
    out = []
    for job in jobs:
        epoch = _repeat(job.record)
        while epoch in taken:
            epoch += 1
        taken.add(epoch)
        out.append((epoch, job))
    return out


def _sample(task: str, job: CellJob, epoch: int) -> dict[str, Any]:
    r, spec = job.record, job.record.spec
    passed = r.status is Status.PASSED
    usage = model_usage(job.trajectory)
    if r.cost_usd is not None and len(usage) == 1:
        next(iter(usage.values()))["total_cost"] = r.cost_usd  # the gateway's metered cost wins
    sample: dict[str, Any] = {
        "id": task,
        "epoch": epoch,
        "input": spec.prompt,
        "target": spec.check or "",
        "messages": messages(job.trajectory),
        "output": {"model": "", "choices": [], "completion": str(r.reason or "")},
        "scores": {
            SCORER: {
                "value": r.reward.value if r.reward else ("C" if passed else "I"),
                "answer": r.status.value,
                "explanation": "passed" if passed else (r.reason or r.status.value),
                "metadata": {
                    "status": r.status.value,
                    "class": failure_class(r),
                    "reason": r.reason,
                    "check_exit": r.check_exit,
                    "workflow_ok": r.workflow_ok,
                    **_graded(r),
                },
            }
        },
        "metadata": {
            "job": r.job_id,
            "batch": r.batch,
            "variant": spec.variant,
            "repeat": spec.repeat,
            "cost_usd": r.cost_usd,
            "num_turns": r.num_turns,
            "image_id": r.image_id,
            **({"task_image": spec.task_image.to_dict()} if spec.task_image else {}),
            **({"harbor": harbor_facts(spec)} if spec.harbor else {}),
        },
        "model_usage": usage,
        "started_at": r.started_at,
        "completed_at": r.finished_at,
        "total_time": r.duration_s,
        "uuid": hashlib.sha256(f"{r.batch}/{r.job_id}/{r.attempt}".encode()).hexdigest()[:22],
    }
    if failure_class(r) == "infrastructure":
        sample["error"] = {
            "message": r.reason or "infrastructure failure",
            "traceback": "",
            "traceback_ansi": "",
        }
    return sample


def _graded(r: JobRecord) -> dict[str, Any]:
    """A graded job's score metadata: the pass beside the reward, its threshold and named keys."""
    if r.reward is None:
        return {}
    return {
        "passed": r.status is Status.PASSED,
        "pass_reward": r.spec.threshold,
        "reward_detail": dict(r.reward.detail),
    }


def _sum_usage(parts: Sequence[Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    total: dict[str, dict[str, Any]] = {}
    for part in parts:
        for model, u in part.items():
            t = total.setdefault(model, {k: 0 for k in u if k != "total_cost"} | {"total_cost": 0.0})
            for key, value in u.items():
                if key == "total_cost":
                    t[key] = None if value is None or t[key] is None else round(t[key] + value, 8)
                else:
                    t[key] = t.get(key, 0) + int(value or 0)
    return total
