"""A task's environment in jobs.toml: `image` or `build` at any layer, the later layer's choice
winning; a build folder hashed by content (its path changes nothing, an edit re-runs its jobs);
the pinned task image kept in the record's spec."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

from flower_batch.jobmodel.environment import TaskImage
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobsfile import parse_jobs_text

TEXT = """
[defaults]
workspace = "ws"
image = "debian:13"

[tasks.plain]
prompt = "p"

[tasks.built]
prompt = "b"
build = { dir = "envs/node", dockerfile = "Dockerfile.ci", args = { NODE = "20" } }

[tasks.axis]
prompt = "a"

[matrix]
task = ["plain", "built"]
include = [{ task = "axis", os = { name = "old", image = "debian:11" } }, { task = "axis", os = { name = "new", build = "envs/node" } }]

[[jobs]]
name = "pinned"
task = "plain"
image = "ubuntu:20.04"
"""


def load(root: Path) -> dict[str, JobSpec]:
    (root / "ws").mkdir(parents=True, exist_ok=True)
    if not (root / "envs").exists():
        (root / "envs" / "node").mkdir(parents=True)
        (root / "envs" / "node" / "Dockerfile").write_text("FROM debian:13\n")
        (root / "envs" / "node" / "Dockerfile.ci").write_text("FROM debian:13\nRUN true\n")
    jobs = parse_jobs_text(textwrap.dedent(TEXT), path=root / "jobs.toml", label="jobs.toml")
    return {_short(job): job for job in jobs.jobs}


def _short(job: JobSpec) -> str:
    """plain, built, axis.old, axis.new, pinned: the task, its os value, or the [[jobs]] name."""
    if job.variant == "pinned":
        return "pinned"
    return f"{job.task}.{job.matrix['os']['name']}" if job.task == "axis" else job.task


def test_each_layer_may_set_the_environment_and_the_later_one_wins(tmp_path):
    jobs = load(tmp_path)
    plain = jobs["plain"]
    assert (plain.image, plain.build) == ("debian:13", None)  # [defaults]
    built = jobs["built"]
    assert built.image is None  # the task's build replaces the defaults' image
    assert built.build is not None and built.build.folder == (tmp_path / "envs" / "node").resolve()
    assert (built.build.dockerfile, dict(built.build.args)) == ("Dockerfile.ci", {"NODE": "20"})
    assert (jobs["axis.old"].image, jobs["axis.old"].build) == ("debian:11", None)  # a matrix value
    assert jobs["axis.new"].image is None and jobs["axis.new"].build is not None
    pinned = jobs["pinned"]
    assert pinned.image == "ubuntu:20.04"  # a [[jobs]] entry


def test_a_build_folder_counts_by_content_not_by_where_it_lies(tmp_path):
    first = load(tmp_path / "a")["built"]
    moved = load(tmp_path / "b")["built"]
    assert first.build.folder != moved.build.folder
    assert first.inputs_hash("sha256:rt") == moved.inputs_hash("sha256:rt")
    (tmp_path / "b" / "envs" / "node" / "Dockerfile.ci").write_text("FROM debian:13\nRUN false\n")
    edited = load(tmp_path / "b")["built"]
    assert edited.build.key != first.build.key
    assert edited.inputs_hash("sha256:rt") != first.inputs_hash("sha256:rt")


def test_an_image_counts_by_its_pinned_id_a_build_by_its_folder(tmp_path):
    jobs = load(tmp_path)
    plain, built = jobs["plain"], jobs["built"]
    one = replace(plain, task_image=TaskImage("sha256:" + "1" * 64, "image", "debian:13"))
    other = replace(plain, task_image=TaskImage("sha256:" + "2" * 64, "image", "debian:13"))
    assert one.inputs_hash("sha256:rt") != other.inputs_hash("sha256:rt")  # the tag moved
    b1 = replace(built, task_image=TaskImage("sha256:" + "1" * 64, "build", "envs/node"))
    b2 = replace(built, task_image=TaskImage("sha256:" + "2" * 64, "build", "/elsewhere/envs/node"))
    assert b1.inputs_hash("sha256:rt") == b2.inputs_hash("sha256:rt")  # rebuilt, same folder


def test_the_record_keeps_the_task_image_and_where_it_came_from(tmp_path):
    built = load(tmp_path)["built"]
    pinned = replace(built, task_image=TaskImage("sha256:" + "3" * 64, "build", "envs/node"))
    again = JobSpec.from_dict(pinned.to_dict())
    assert again == pinned
    assert (
        again.task_image is not None
        and again.task_image.describe() == "build envs/node (sha256:333333333333)"
    )
    assert "task_image" not in load(tmp_path)["plain"].to_dict()  # a record from before: unchanged


def test_the_layered_digest_a_cluster_ran_is_kept_but_is_no_input(tmp_path):
    plain = load(tmp_path)["plain"]
    here = replace(plain, task_image=TaskImage("sha256:" + "4" * 64, "image", "debian:13"))
    there = replace(
        here, task_image=replace(here.task_image, layered="reg:5000/flower-batch-task@sha256:" + "5" * 64)
    )
    again = JobSpec.from_dict(there.to_dict())
    assert again == there and again.task_image is not None
    assert again.task_image.layered == "reg:5000/flower-batch-task@sha256:" + "5" * 64
    # the same task image on one machine or a cluster: a finished result is kept either way
    assert there.inputs_hash("sha256:rt") == here.inputs_hash("sha256:rt")
    assert "layered" not in here.to_dict()["task_image"]  # a one-machine record: unchanged
