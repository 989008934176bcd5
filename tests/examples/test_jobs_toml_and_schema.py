"""The shipped examples/jobs.toml and schemas/jobs.schema.json."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from flower_batch.jobsfile import JOB_FIELDS, load_jobs_file

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "jobs.toml"
SCHEMA = json.loads((ROOT / "schemas" / "jobs.schema.json").read_text())


def test_example_expands_to_two_variants_two_tasks_two_repeats(tmp_path):
    # Copied so the test does not depend on the demo's scenario file being present.
    shutil.copy(EXAMPLE, tmp_path / "jobs.toml")
    shutil.copytree(ROOT / "examples" / "tasks", tmp_path / "tasks")
    scenario = tmp_path / tomllib.loads(EXAMPLE.read_text())["defaults"]["gateway"]["scenario"]
    scenario.parent.mkdir(parents=True, exist_ok=True)
    scenario.write_text("{}")
    jobs = load_jobs_file(tmp_path / "jobs.toml")
    assert jobs.name == "demo" and len(jobs.jobs) == 8
    assert jobs.tasks == ("hello", "fizzbuzz") and jobs.variants == ("careful", "quick")
    assert {j.workflow for j in jobs.jobs} == {"examples.workflows:careful", "examples.workflows:quick"}
    assert all(j.check and j.gateway.mode == "scripted" for j in jobs.jobs)
    assert {j.workspace.name for j in jobs.jobs} == {"hello", "fizzbuzz"}


def test_schema_lists_every_job_field():
    properties = SCHEMA["properties"]
    assert set(properties["defaults"]["properties"]) == {*JOB_FIELDS, "image"}
    assert set(properties["tasks"]["additionalProperties"]["properties"]) == {*JOB_FIELDS, "description"}
    assert set(properties["jobs"]["items"]["properties"]) == {*JOB_FIELDS, "name", "task", "repeat", "matrix"}
    taskset = set(properties["tasksets"]["additionalProperties"]["properties"])
    assert taskset == {*JOB_FIELDS, "harbor", "include", "exclude", "pass_reward"}


def test_schema_accepts_the_example_and_rejects_mistakes():
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft7Validator(SCHEMA)
    example = tomllib.loads(EXAMPLE.read_text())
    assert list(validator.iter_errors(example)) == []
    bad = [
        {**example, "defaults": {**example["defaults"], "timeout": "ten"}},
        {**example, "defaults": {**example["defaults"], "secrets": ["ANTHROPIC_API_KEY"]}},
        {**example, "tasks": {"hello": {"prompt": "x", "build": {"dockerfile": "Dockerfile.ci"}}}},
        {**example, "matrix": {"variant": []}},
        {**example, "jobs": [{"task": "hello"}]},
        {**example, "defaultz": {}},
        {"tasksets": {"tb": {"include": ["fix-*"]}}},  # no harbor
        {"tasksets": {"tb": {"harbor": "tasks", "workspace_exclude": []}}},
        {"defaults": {}},  # no tasks and no task set
    ]
    assert [bool(list(validator.iter_errors(doc))) for doc in bad] == [True] * len(bad)
    # a task's own environment: an image, or a folder to build
    for env in (
        {"image": "debian:13"},
        {"build": "envs/node"},
        {"build": {"dir": "envs/node", "args": {"V": "1"}}},
    ):
        assert list(validator.iter_errors({**example, "tasks": {"hello": {"prompt": "x", **env}}})) == []
    tasksets = {"tb": {"harbor": "tasks/tb2", "include": ["fix-*"], "exclude": "*-git", "pass_reward": 0.5}}
    assert list(validator.iter_errors({"tasksets": tasksets, "matrix": {"variant": ["a"]}})) == []
