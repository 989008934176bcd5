"""The commands' side of task images that needs no engine: a cluster refuses a task's own image
in one line before anything is looked up, and `--build` is checked before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from flower_batch.commands.environments import build_recipe, pin_environments
from flower_batch.errors import FlowerBatchError
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.layout import Home


def _job(**fields: object) -> JobSpec:
    return JobSpec(id="t.r1", task="t", variant="default", repeat=1, matrix={}, prompt="p", **fields)  # type: ignore[arg-type]


def test_a_task_image_on_the_swarm_is_one_line_before_the_engine_is_asked(tmp_path: Path) -> None:
    with pytest.raises(FlowerBatchError) as refused:
        pin_environments(
            [_job(image="debian:13")],
            PinnedImage("sha256:" + "0" * 64),
            home=Home(tmp_path),
            where="jobs.toml",
            backend="swarm",
        )
    assert "local Docker engine only" in str(refused.value) and "--backend docker" in str(refused.value)
    assert not any(tmp_path.iterdir())  # nothing written


def test_jobs_without_an_image_of_their_own_need_no_engine_on_any_backend(tmp_path: Path) -> None:
    found = pin_environments(
        [_job()], PinnedImage("sha256:" + "0" * 64), home=Home(tmp_path), where="jobs.toml", backend="swarm"
    )
    assert found.bundle is None and found.jobs[0].task_image is None


def test_build_is_a_folder_with_its_dockerfile(tmp_path: Path) -> None:
    with pytest.raises(FlowerBatchError, match="not a folder"):
        build_recipe(tmp_path / "nowhere")
    with pytest.raises(FlowerBatchError, match="has no Dockerfile"):
        build_recipe(tmp_path)
    (tmp_path / "Dockerfile").write_text("FROM debian:13\n")
    recipe = build_recipe(tmp_path)
    assert recipe.folder == tmp_path.resolve() and recipe.folder_hash.startswith("sha256:")
