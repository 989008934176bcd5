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


def gateway_name(batch: str, session: str, suffix: str) -> str:
    from flower_batch.gateway.sidecar import GatewaySidecar

    gw = GatewaySidecar(None, batch=batch, session=session, suffix=suffix, image_id="sha256:x",  # type: ignore[arg-type]
                        batch_dir=Path("/nonexistent"), scenario=None, mode="replay")
    return gw.name


def test_gateway_names_stay_unique_and_short_for_long_batch_names() -> None:
    long_a = "nightly-evaluation-of-the-refactoring-agents-" + "x" * 40
    long_b = long_a + "-v2"
    names = {
        gateway_name(batch, session, suffix)
        for batch in (long_a, long_b, "demo")
        for session in ("0123abcd", "89ef4567")
        for suffix in ("", "-g0", "-g1", "-g12")
    }
    assert len(names) == 3 * 2 * 4
    assert all(len(n + "-gateway") <= 63 and len(n + "-out") <= 63 for n in names)
    assert all(n.startswith("fb-") for n in names)
    assert len(gateway_name("demo", "s" * 80, "-g3") + "-gateway") <= 63
