"""A failed build skips only its task (issue 35): resolve_environments with keep_going leaves out
that task's jobs, one line each, and every other task's image is pinned; without it the first
failure stops everything as before. The engine is not asked: the build itself (`_built`), the
label lookup, the bundle and the probe stand in, so this is the bookkeeping only (a real build
is test_task_images_on_docker.py's)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flower_batch.errors import FlowerBatchError
from flower_batch.jobmodel.environment import TaskImage
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobsfile import parse_jobs_text
from flower_batch.running import task_images

RUNTIME = PinnedImage("sha256:" + "a" * 64, {})


class _Images:
    def __init__(self, *_: object) -> None:
        pass

    def ids_by_label(self, key: str) -> dict[str, str]:
        return {}

    def close(self) -> None:
        pass


@pytest.fixture
def jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    for name in ("good", "bad"):
        (tmp_path / "envs" / name).mkdir(parents=True)
        (tmp_path / "envs" / name / "Dockerfile").write_text(f"FROM scratch\nLABEL t={name}\n")
    text = textwrap.dedent(
        """
        [defaults]
        prompt = "p"
        [tasks.good]
        build = "envs/good"
        [tasks.bad]
        build = "envs/bad"
        [matrix]
        variant = ["a", "b"]
        """
    )

    def built(images, task, recipe, *, where, home_root, log):  # type: ignore[no-untyped-def]
        if task == "bad":
            raise FlowerBatchError(f"{where}: task bad: the build of envs/bad failed at step 2/2 (log: x)")
        return TaskImage("sha256:" + "b" * 64, "build", "envs/good")

    monkeypatch.setattr(task_images, "DockerImages", _Images)
    monkeypatch.setattr(task_images, "_built", built)
    monkeypatch.setattr(task_images, "bundle_volume", lambda images, runtime, log: "bundle-volume")
    monkeypatch.setattr(task_images, "probe", lambda *args: None)
    return parse_jobs_text(text, path=tmp_path / "jobs.toml").jobs


def test_a_failed_build_leaves_out_only_its_task(jobs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    found = task_images.resolve_environments(
        jobs, RUNTIME, where="jobs.toml", home_root=tmp_path, log=lambda line: None, keep_going=True
    )
    assert [j.id for j in found.jobs] == ["good.a.r1", "good.b.r1"]
    assert all(j.task_image and j.task_image.id == "sha256:" + "b" * 64 for j in found.jobs)
    assert set(found.unbuilt) == {"bad.a.r1", "bad.b.r1"}
    assert (
        found.unbuilt["bad.a.r1"] == "jobs.toml: task bad: the build of envs/bad failed at step 2/2 (log: x)"
    )


def test_without_keep_going_the_first_failure_stops_everything(jobs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(FlowerBatchError, match="task bad: the build of envs/bad failed"):
        task_images.resolve_environments(
            jobs, RUNTIME, where="jobs.toml", home_root=tmp_path, log=lambda line: None
        )


def test_when_every_task_fails_to_build_the_first_failure_stops_everything(jobs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    only_bad = [j for j in jobs if j.task == "bad"]
    with pytest.raises(FlowerBatchError, match="task bad: the build of envs/bad failed"):
        task_images.resolve_environments(
            only_bad, RUNTIME, where="jobs.toml", home_root=tmp_path, log=lambda line: None, keep_going=True
        )
