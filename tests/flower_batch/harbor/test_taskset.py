"""Which task folders a `harbor = "..."` path names, and globs on task names."""

from __future__ import annotations

from pathlib import Path

import pytest

from flower_batch.errors import HarborTaskError
from flower_batch.harbor.taskset import select, task_folders, unmatched

FIXTURES = Path(__file__).resolve().parents[2] / "batch_fixtures" / "harbor_tasks"


def test_a_folder_of_task_folders_and_one_task_folder() -> None:
    every = task_folders(FIXTURES)
    assert list(every) == [
        "fix-permissions",
        "install-local-package",
        "log-summary-date-ranges",
        "modernize-python-script",
        "regex-log",
    ]
    assert task_folders(FIXTURES / "regex-log") == {"regex-log": FIXTURES / "regex-log"}


def test_hidden_and_other_folders_are_passed_over(tmp_path: Path) -> None:
    for name in ("a", ".git", "notes"):
        (tmp_path / name).mkdir()
    (tmp_path / "a" / "task.toml").write_text("")
    (tmp_path / ".git" / "task.toml").write_text("")
    assert list(task_folders(tmp_path)) == ["a"]


@pytest.mark.parametrize("make", ["nothing", "a-file"])
def test_a_path_with_no_task_folder_is_one_line(make: str, tmp_path: Path) -> None:
    path = tmp_path / "x.txt" if make == "a-file" else tmp_path
    if make == "a-file":
        path.write_text("")
    with pytest.raises(HarborTaskError, match="no Harbor task folder|is not a folder"):
        task_folders(path)


def test_two_folders_making_one_name_are_refused(tmp_path: Path) -> None:
    for name in ("a.b", "a-b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "instruction.md").write_text("x")
    with pytest.raises(HarborTaskError, match='both make task "a-b"'):
        task_folders(tmp_path)


def test_globs_select_by_name_and_a_glob_that_selects_nothing_is_found() -> None:
    names = ["fix-git", "fix-permissions", "regex-log"]
    assert select(names, ["fix-*"], []) == ["fix-git", "fix-permissions"]
    assert select(names, [], ["fix-*"]) == ["regex-log"]
    assert select(names, ["fix-*", "regex-*"], ["*-git"]) == ["fix-permissions", "regex-log"]
    assert unmatched(names, ["fix-*", "nope*"]) == ["nope*"]
