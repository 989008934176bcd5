"""hand_over: what the host copied in becomes the sandbox user's; a job's own tree is not walked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flower_batch.backend.confinement import SANDBOX_UID, hand_over
from flower_batch.untrusted_files import remove_tree
from tests.hostile_fixtures import deep_tree

pytestmark = pytest.mark.skipif(
    os.getuid() != 0, reason="only a root orchestrator hands folders over (CI is root)"
)


def test_a_copied_tree_is_handed_over_and_a_link_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("host's\n")
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("x\n")
    (ws / "link").symlink_to(outside)
    hand_over(ws)
    for p in (ws, ws / "src", ws / "src" / "a.py", ws / "link"):
        assert os.lstat(p).st_uid == SANDBOX_UID, p
    assert outside.stat().st_uid == 0


def test_a_jobs_own_deep_tree_is_not_walked(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    deep_tree(ws / "deep", 3000)  # os.walk: RecursionError, and paths past PATH_MAX
    for folder in (ws, ws / "deep"):  # handed over before: the job made what is below
        os.lchown(folder, SANDBOX_UID, SANDBOX_UID)
    hand_over(ws)  # returns: the job's folders are the job's already
    assert os.lstat(ws / "deep" / "d").st_uid == 0  # not entered
    remove_tree(ws)
