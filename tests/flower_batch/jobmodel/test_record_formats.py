"""Every record format written so far still reads, typed: one record of each, as the code of its
time wrote it (fields were only ever added; `format` stayed flower-batch/job-record@1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flower_batch.errors import RecordError
from flower_batch.jobmodel.classes import FailureClass
from flower_batch.jobmodel.modes import GatewayMode
from flower_batch.jobmodel.record import JobRecord, read_record
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.status import Status

SPEC_V1 = {
    "id": "hello.v1.r1", "task": "hello", "variant": "v1", "repeat": 1, "matrix": {"model": "m"},
    "prompt": "say hi", "workflow": "flows.py:main", "args": {}, "model": None,
    "workspace": "/src/hello", "workspace_hash": "abc", "check": "test -f hi", "check_timeout_s": 300,
    "timeout_s": 1800, "cpus": None, "memory_bytes": None, "env": {}, "secrets": ["ANTHROPIC_API_KEY"],
    "gateway": {"mode": "scripted", "scenario": "/s.toml", "scenario_hash": "h", "recording": None,
                "recording_hash": None},
    "budget_usd": None,
}  # fmt: skip
# The first format (commit e6a85ed): no class, no session, no continuity, no backend or node.
FIRST = {
    "format": "flower-batch/job-record@1", "job_id": "hello.v1.r1", "batch": "b", "status": "failed",
    "reason": "check exited 1", "inputs_hash": "h1", "image_id": "sha256:aa", "gateway_mode": "scripted",
    "attempt": 1, "exit_code": 0, "workflow_ok": True, "check_exit": 1, "check_output": "no hi",
    "cost_usd": 0.01, "num_turns": 3, "steps": [{"name": "work", "ok": True}], "queued_at": None,
    "started_at": "2026-11-20T10:00:00Z", "finished_at": "2026-11-20T10:01:00Z", "duration_s": 60.0,
    "container": "c1", "versions": {"sdk": "0.2.1"}, "spec": SPEC_V1,
}  # fmt: skip
# Classes, the orchestrator session, continuity, gateway health, the backend and the node.
CLASSES = {
    **FIRST, "status": "error", "class": "infrastructure", "session": "s-1", "backend": "swarm",
    "node": "node-2", "continuity": [{"step": "work", "continued": True}],
    "gateway_health": {"deaths": 1, "restarts": 1},
}  # fmt: skip
# Persistent jobs: the spec's persistent, network, pids and placement, and the budget history.
PERSISTENT = {
    **CLASSES, "status": "paused", "class": "paused", "attempt": 2,
    "budget_history": [{"attempt": 1, "status": "paused", "budget_usd": 0.05, "spent_usd": 0.06}],
    "spec": {**SPEC_V1, "budget_usd": 0.05, "persistent": True, "network": "internet", "pids": 256,
             "placement": ["node.labels.gpu==1"]},
}  # fmt: skip
# In flight: queued, and running with no end yet.
QUEUED = {**FIRST, "status": "queued", "finished_at": None, "check_exit": None, "workflow_ok": None}


@pytest.mark.parametrize(
    "data", [FIRST, CLASSES, PERSISTENT, QUEUED], ids=["first", "classes", "persistent", "queued"]
)
def test_each_earlier_format_reads_typed(tmp_path: Path, data: dict) -> None:
    path = tmp_path / "record.json"
    path.write_text(json.dumps(data))
    record = read_record(path)
    assert isinstance(record.status, Status) and record.status == data["status"]
    assert isinstance(record.spec, JobSpec) and record.spec.id == data["job_id"]
    assert record.gateway_mode is GatewayMode.SCRIPTED
    assert record.finished is (data["status"] != "queued")
    # The spec reads back as it was written: what the inputs hash and the reports saw.
    assert record.spec.to_dict() == {**data["spec"], "check_timeout_s": 300.0, "timeout_s": 1800.0}
    again = JobRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again == record


def test_the_later_fields_are_typed_where_they_exist() -> None:
    assert JobRecord.from_dict(FIRST).failure_class is None
    assert JobRecord.from_dict(CLASSES).failure_class is FailureClass.INFRASTRUCTURE
    paused = JobRecord.from_dict(PERSISTENT)
    assert (
        paused.persistent and paused.budget_usd == 0.05 and paused.spec.placement == ("node.labels.gpu==1",)
    )
    assert paused.budget_history[0]["spent_usd"] == 0.06


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"status": "done"}, "unknown status 'done'"),
        ({"gateway_mode": "openai"}, "unknown gateway mode 'openai'"),
        ({"spec": None}, "missing field `spec`"),
        ({"spec": {"task": "t"}}, "malformed field `spec`: no 'id'"),
    ],
)
def test_a_bad_record_is_one_record_error(change: dict, says: str) -> None:
    with pytest.raises(RecordError, match=says.replace("(", r"\(").replace("[", r"\[")):
        JobRecord.from_dict({**FIRST, **change})
