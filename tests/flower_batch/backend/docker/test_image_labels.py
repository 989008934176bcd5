"""The layered image's labels in one LABEL step of its Dockerfile (running/layered.py): given to
the classic builder, each label is a step of its own (a container and a commit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flower_batch.backend.docker.images import DockerImages, label_line
from flower_batch.jobmodel.environment import TaskImage
from flower_batch.labels import LAYERED, TASK_BUILD
from flower_batch.running.layered import dockerfile, labels_of, pair
from tests.batch_fixtures.task_images import DEBIAN13, ensure

LABELS = {
    "org.flower-batch.test.pair": "sha256:aa sha256:bb",  # a space
    "org.flower-batch.test.odd": 'a "quoted" $HOME \\ back',  # quotes, no variable expansion, a backslash
    "org.flower-batch.test.empty": "",
}


def test_the_label_line_quotes_every_key_and_value() -> None:
    assert label_line({"b": 'x "y" $Z', "a": "1"}) == 'LABEL "a"="1" "b"="x \\"y\\" \\$Z"'
    with pytest.raises(ValueError, match="newline"):
        label_line({"a": "two\nlines"})


def test_the_layered_recipe_sets_its_labels_in_one_step() -> None:
    task = TaskImage(id="sha256:" + "1" * 64, origin="image", ref="debian:13")
    labels = labels_of(task, "sha256:" + "2" * 64, "sha256:key")
    assert labels[LAYERED] == pair(task.id, "sha256:" + "2" * 64) and labels[TASK_BUILD] == ""
    steps = dockerfile(task.id, "sha256:" + "2" * 64, labels).splitlines()
    assert [s.split()[0] for s in steps] == ["FROM", "COPY", "LABEL"]  # no RUN: a shell-less image layers too
    assert steps[-1] == label_line(labels)


@pytest.mark.docker
def test_the_engine_reads_the_label_line_back(tmp_path: Path) -> None:
    base = ensure(DEBIAN13)
    (tmp_path / "Dockerfile").write_text(f"FROM {base}\n{label_line(LABELS)}\n")
    images = DockerImages()
    image_id = images.build(tmp_path, None, {}, {})
    try:
        info = images.find(image_id)
        assert info is not None and {k: info.labels.get(k) for k in LABELS} == LABELS
        history = [row["CreatedBy"] for row in images._api().history(image_id)]  # newest first
        assert len(history) == len(images._api().history(base)) + 1 and "LABEL" in history[0], history
    finally:
        images.remove(image_id)
        images.close()
