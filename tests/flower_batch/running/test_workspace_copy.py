"""A job's workspace copy (issue 34): by the scan's rules, one line when it cannot be made, the
size limit with the largest folders, and stopped between chunks when the command stops."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from flower_batch.errors import WorkspaceUnusable
from flower_batch.running.workspace_copy import copy_workspace, size_problem
from flower_batch.workspace_scan import mark_home, rules_for, scan


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    return root


def test_run_dot_copies_the_project_without_its_home(tmp_path: Path) -> None:
    root = project(tmp_path)
    home = root / "volumes"
    mark_home(home)
    dest = home / "adhoc" / "j1" / "workspace"  # the copy lands inside what it copies
    (root / "link").symlink_to("src/app.py")
    os.mkfifo(root / "pipe")
    copied = copy_workspace(root, dest, rules_for(root, leave_out=(home,)), limit_bytes=None)
    assert sorted(os.listdir(dest)) == ["link", "run.sh", "src"]
    assert (dest / "src" / "app.py").read_text() == "print('hi')\n"
    assert os.readlink(dest / "link") == "src/app.py" and os.access(dest / "run.sh", os.X_OK)
    assert copied.skipped == [("pipe", "fifo")]
    again = home / "adhoc" / "j2" / "workspace"  # a second job: still no earlier job inside
    copy_workspace(root, again, rules_for(root, leave_out=(home,)), limit_bytes=None)
    assert not (again / "volumes").exists()


def test_a_copy_that_fails_is_one_line_naming_the_path_and_cause(tmp_path: Path) -> None:
    root = project(tmp_path)
    for i in range(50):
        (root / "src" / f"m{i}.py").write_text("x\n")
    dest = tmp_path / "dest"
    (dest / "src" / "app.py").mkdir(parents=True)  # where the file goes, a folder: it cannot be written
    with pytest.raises(WorkspaceUnusable) as caught:
        copy_workspace(root, dest, rules_for(root), limit_bytes=None)
    text = str(caught.value)
    assert "\n" not in text and text.count("src/") == 1, text  # the one path, not a list of them
    assert text.endswith("cannot copy src/app.py: Is a directory"), text


def test_a_missing_workspace_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceUnusable) as caught:
        copy_workspace(tmp_path / "gone", tmp_path / "dest", rules_for(tmp_path / "gone"), limit_bytes=None)
    assert "gone" in str(caught.value) and "\n" not in str(caught.value)


def test_over_the_limit_names_the_size_and_the_largest_folders(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "assets").mkdir()
    (root / "assets" / "big.bin").write_bytes(b"\0" * 3 * 1024 * 1024)
    (root / "small").mkdir()
    (root / "small" / "x").write_bytes(b"\0" * 1024)
    problem = size_problem(scan(root), 1024 * 1024, fix="--workspace-limit SIZE")
    assert problem is not None and "\n" not in problem
    assert (
        " is 3.0 MiB, over the 1.0 MiB a job copies (largest: assets/ 3.0 MiB, small/ 1 KiB, src/ 12 B)"
        in problem
    ), problem
    assert problem.endswith("or allow it: --workspace-limit SIZE")
    assert size_problem(scan(root), 0, fix="") is None  # "none": no size limit
    with pytest.raises(WorkspaceUnusable):
        copy_workspace(root, tmp_path / "dest", rules_for(root), limit_bytes=1024 * 1024)
    assert not (tmp_path / "dest").exists()  # refused before anything is written


def test_a_stop_ends_the_copy_between_chunks(tmp_path: Path) -> None:
    root = project(tmp_path)
    stop = threading.Event()
    stop.set()
    copy_workspace(root, tmp_path / "dest", rules_for(root), limit_bytes=None, stop=stop)
    assert not (tmp_path / "dest" / "run.sh").exists() and not (tmp_path / "dest" / "src" / "app.py").exists()
