"""A Harbor task folder read onto job fields (issue 35): the mapping table of
flower_batch/harbor/task_folder.py, and one line for each folder it cannot honour."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flower_batch.errors import HarborTaskError
from flower_batch.harbor.task_folder import read_task, task_name
from flower_batch.jobmodel.hashing import tree_hash
from flower_batch.jobmodel.spec import MIN_DISK

FIXTURES = Path(__file__).resolve().parents[2] / "batch_fixtures" / "harbor_tasks"


def _copy(task: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / task, tmp_path / task))


def test_a_terminal_bench_style_folder_maps_onto_job_fields() -> None:
    folder = FIXTURES / "regex-log"
    task = read_task(folder)
    assert task.name == "regex-log"
    assert task.prompt == (folder / "instruction.md").read_text()
    assert task.image is None and task.build_dir == folder / "environment"
    assert task.build_hash == tree_hash(folder / "environment")
    assert (task.timeout_s, task.cpus, task.memory_bytes) == (600.0, 1.0, 1024 * 1024 * 1024)
    assert (task.network, task.user) == ("gateway", "sandbox")
    assert task.verifier.folder == folder / "tests"
    assert task.verifier.folder_hash == tree_hash(folder / "tests")
    assert task.verifier.timeout_s == 60.0
    harbor = task.harbor
    assert harbor.digest == tree_hash(folder)  # the whole folder, tests and solution included
    assert (harbor.schema_version, harbor.has_solution, harbor.network_policy) == ("1.1", True, "no-network")
    assert harbor.metadata["difficulty"] == "medium"
    assert harbor.metadata["tags"] == ["regex", "logs"]
    assert task.disk_bytes == 2048 * 1024**2 and "storage_mb" not in harbor.metadata  # the job's disk
    assert task.description and "IPv4" in task.description


def test_internet_and_root_when_the_task_asks_and_the_verifiers_env() -> None:
    apt = read_task(FIXTURES / "install-local-package")
    assert (apt.network, apt.harbor.network_policy, apt.user) == ("internet", "public", "root")
    modern = read_task(FIXTURES / "modernize-python-script")  # schema_version, not version
    assert modern.harbor.schema_version == "1.1"
    assert modern.verifier.env == {"PYTHONDONTWRITEBYTECODE": "1"}
    assert (modern.cpus, modern.memory_bytes, modern.disk_bytes) == (None, None, None)


def test_a_storage_below_the_smallest_disk_gets_the_smallest_disk(tmp_path: Path) -> None:
    folder = _copy("fix-permissions", tmp_path)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text() + "\n[environment]\nstorage_mb = 8\n")
    assert read_task(folder).disk_bytes == MIN_DISK


def test_a_prebuilt_docker_image_wins_over_the_dockerfile(tmp_path: Path) -> None:
    folder = _copy("fix-permissions", tmp_path)
    toml = folder / "task.toml"
    toml.write_text(
        toml.read_text() + '\n[environment]\ndocker_image = "debian:13"\nnetwork_mode = "public"\n'
    )
    task = read_task(folder)
    assert (task.image, task.build_dir, task.network) == ("debian:13", None, "internet")


def test_the_digest_changes_with_any_file_of_the_folder(tmp_path: Path) -> None:
    folder = _copy("regex-log", tmp_path)
    before = read_task(folder)
    (folder / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    after = read_task(folder)
    assert after.harbor.digest != before.harbor.digest
    assert after.verifier.folder_hash != before.verifier.folder_hash
    assert after.build_hash == before.build_hash


def _remove(relative: str):
    def edit(folder: Path) -> None:
        path = folder / relative
        shutil.rmtree(path) if path.is_dir() else path.unlink()

    return edit


def _append(relative: str, text: str):
    def edit(folder: Path) -> None:
        path = folder / relative
        path.write_text((path.read_text() if path.exists() else "") + text)

    return edit


def _replace(relative: str, old: str, new: str):
    def edit(folder: Path) -> None:
        path = folder / relative
        path.write_text(path.read_text().replace(old, new))

    return edit


BAD = [
    ("no-instruction", _remove("instruction.md"), "instruction.md: not found"),
    ("no-task-toml", _remove("task.toml"), "task.toml: not found"),
    ("toml-does-not-parse", _append("task.toml", "\n[agent\n"), "task.toml: not valid TOML"),
    ("unknown-schema", _replace("task.toml", 'version = "1.1"', 'version = "2.0"'), 'schema_version "2.0"'),
    ("compose", _append("environment/docker-compose.yaml", "services: {main: {}}\n"), "not honoured yet"),
    (
        "allowlist",
        _append("task.toml", '\n[environment]\nnetwork_mode = "allowlist"\n'),
        '"allowlist" is not honoured yet',
    ),
    ("no-dockerfile", _remove("environment/Dockerfile"), "environment/Dockerfile: not found"),
    ("no-test-sh", _remove("tests/test.sh"), "tests/test.sh: not found"),
    ("a-user", _replace("task.toml", "[agent]\n", '[agent]\nuser = "alice"\n'), "'alice' is not honoured"),
    (
        "bad-timeout",
        _replace("task.toml", "timeout_sec = 300.0", 'timeout_sec = "soon"'),
        "[agent] timeout_sec must be",
    ),
]


@pytest.mark.parametrize(("case", "edit", "expected"), BAD, ids=[b[0] for b in BAD])
def test_a_folder_it_cannot_honour_is_one_line_naming_the_file(case, edit, expected, tmp_path: Path) -> None:
    folder = _copy("fix-permissions", tmp_path)
    edit(folder)
    with pytest.raises(HarborTaskError) as caught:
        read_task(folder)
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message and str(folder) in message


def test_an_empty_instruction_is_refused(tmp_path: Path) -> None:
    folder = _copy("fix-permissions", tmp_path)
    (folder / "instruction.md").write_text("  \n")
    with pytest.raises(HarborTaskError, match="is empty"):
        read_task(folder)


def test_task_names_are_the_folders_names_made_safe_for_job_ids() -> None:
    assert task_name(Path("/x/fix-git")) == "fix-git"
    assert task_name(Path("/x/swe.bench__1")) == "swe-bench__1"
