"""Regression tests for review findings in flower_batch (pure: no Docker)."""

from __future__ import annotations

import json
from pathlib import Path

from flower_batch.gateway.routing import PerJobLog


def test_budget_refusal_of_a_valid_job_stays_in_its_log(tmp_path: Path) -> None:
    log = PerJobLog(tmp_path)
    log.add({"prefix": "/j/job-1", "rule": "gateway:budget", "status": 402})
    log.add({"prefix": "/j/job-1", "rule": "gateway:bad-token", "status": 401})
    log.add({"prefix": "", "rule": "gateway:no-job", "status": 404})
    own = [json.loads(line) for line in (tmp_path / "job-1" / "logs" / "gateway.jsonl").read_text().splitlines()]
    unrouted = [json.loads(line) for line in (tmp_path / "gateway-unrouted.jsonl").read_text().splitlines()]
    assert [r["rule"] for r in own] == ["gateway:budget"]
    assert [r["rule"] for r in unrouted] == ["gateway:bad-token", "gateway:no-job"]
