"""The commands' side of task images that needs no engine: jobs in the runtime image ask no engine
on any backend, and `--build` is checked before anything is written. (A task's own image on the
swarm: tests/flower_batch/backend/swarm/test_swarm_task_images.py.)"""

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
