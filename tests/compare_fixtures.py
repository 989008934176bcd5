"""results.json documents for the comparison tests, in the exact shape `BatchResults` writes
(job entries carry a real `JobOutcome.to_dict()`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.status import Status
from flower_batch.reports import RESULTS_FORMAT

# (status, cost, turns, duration); a status string alone means cost 0.01, 3 turns, 10 s.
Job = str | tuple[str, float | None, int | None, float | None]


def results_document(
    batch: str, plan: Mapping[tuple[str, str], Sequence[Job]], **extra: Any
) -> dict[str, Any]:
    jobs = []
    for (task, variant), entries in plan.items():
        for repeat, entry in enumerate(entries, start=1):
            status, cost, turns, duration = (entry, 0.01, 3, 10.0) if isinstance(entry, str) else entry
            job_id = f"{task}.{variant}.r{repeat}"
            outcome = None
            if status != "pending":
                outcome = JobOutcome(
                    job_id,
                    Status(status),
                    workflow_ok=status != "failed" or repeat % 2 == 0,
                    check_exit=1 if status == "failed" else 0,
                    cost_usd=cost,
                    num_turns=turns,
                    duration_s=duration,
                    gateway_mode="scripted",
                ).to_dict()
            jobs.append(
                {
                    "id": job_id,
                    "task": task,
                    "variant": variant,
                    "repeat": repeat,
                    "matrix": {"variant": variant},
                    "status": status,
                    "outcome": outcome,
                    "inputs": {},
                }
            )
    return {
        "format": RESULTS_FORMAT,
        "batch": batch,
        "image_id": "sha256:" + "b" * 64,
        "generated_at": "2026-12-01T03:17:00Z",
        "gateway": {"modes": ["scripted"], "label": "scripted model"},
        "jobs": jobs,
        **extra,
    }


def write_document(path: Path, document: Mapping[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


# Yesterday and today: hello×careful regressed (10/10 -> 2/10), fizz×careful improved (1/10 ->
# 9/10), hello×quick unchanged (5/10 -> 6/10); fizz×quick was dropped, bye×careful is new.
BASE_PLAN: dict[tuple[str, str], list[Job]] = {
    ("hello", "careful"): ["passed"] * 10,
    ("hello", "quick"): ["passed"] * 5 + ["failed"] * 5,
    ("fizz", "careful"): ["passed"] + ["failed"] * 9,
    ("fizz", "quick"): ["passed"] * 3,
}
NEW_PLAN: dict[tuple[str, str], list[Job]] = {
    ("hello", "careful"): [("passed", 0.03, 5, 20.0)] * 2 + [("failed", 0.05, 9, 40.0)] * 8,
    ("hello", "quick"): ["passed"] * 6 + ["failed"] * 3 + ["timeout"],
    ("fizz", "careful"): ["passed"] * 9 + ["error"],
    ("bye", "careful"): ["passed", "skipped", "pending"],
}
