"""What a job's workspace copy holds (issue 34): a home inside the workspace, what
.flowerbatchignore and `exclude` name, FIFOs and symlinks out of it are left out; the scan is
bounded; the content hash covers exactly what is copied."""

from __future__ import annotations

import os
from pathlib import Path

from flower_batch.jobmodel.hashing import tree_hash
from flower_batch.workspace_scan import HOME_MARK, Rules, mark_home, rules_for, scan


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "README.md").write_text("# proj\n")
    return root


def test_a_home_inside_the_workspace_is_left_out_by_its_mark_or_by_path(tmp_path: Path) -> None:
    root = project(tmp_path)
    before = tree_hash(root)
    home = root / "volumes"
    mark_home(home)
    (home / "adhoc" / "j1" / "workspace").mkdir(parents=True)
    (home / "adhoc" / "j1" / "workspace" / "big.bin").write_bytes(b"x" * 1000)
    found = scan(root)
    assert "volumes" not in found.dirs and not any(r.startswith("volumes/") for r in found.files)
    assert ("volumes", "a flower-batch home") in found.left_out
    assert tree_hash(root) == before  # the home growing re-runs nothing
    (home / HOME_MARK).unlink()  # an unmarked home given by path is left out too
    assert not any(r.startswith("volumes/") for r in scan(root, Rules(leave_out=(home.resolve(),))).files)
    assert any(r.startswith("volumes/") for r in scan(root).files)


def test_ignore_file_and_exclude_patterns(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "data").mkdir()
    (root / "data" / "x.csv").write_text("1\n")
    (root / "src" / "model.bin").write_bytes(b"0")
    (root / "src" / "data").write_text("a file named data\n")
    (root / ".flowerbatchignore").write_text("# big things\ndata/\n*.bin\n")
    found = scan(root, rules_for(root))
    assert "data" not in found.dirs and "src/model.bin" not in found.files
    assert "src/data" in found.files  # `data/` matches directories only
    anchored = scan(root, rules_for(root, ("src/app.py",)))
    assert "src/app.py" not in anchored.files and "README.md" in anchored.files
    assert tree_hash(root, rules_for(root)) != tree_hash(root)


def test_fifos_and_symlinks_out_are_skipped_and_named_links_inside_are_kept(tmp_path: Path) -> None:
    root = project(tmp_path)
    os.mkfifo(root / "pipe")
    (root / "out").symlink_to("/etc/passwd")
    (root / "src" / "up").symlink_to("../../outside")
    (root / "inside").symlink_to("src/app.py")
    found = scan(root)
    why = dict(found.skipped)
    assert why["pipe"] == "fifo"
    assert "points out of the workspace" in why["out"] and "points out of the workspace" in why["src/up"]
    assert found.symlinks == {"inside": "src/app.py"}
    line = found.skipped_line()
    assert line is not None and "pipe (fifo)" in line and "\n" not in line
    tree_hash(root)  # a FIFO is never opened: this returns


def test_the_scan_is_bounded_in_entries_and_depth(tmp_path: Path) -> None:
    root = project(tmp_path)
    for i in range(30):
        (root / f"f{i}").write_text("")
    found = scan(root, max_entries=10)
    assert found.cut == "more than 10 entries" and found.entries == 10
    deep = root / "d"
    for i in range(8):
        deep = deep / str(i)
    deep.mkdir(parents=True)
    found = scan(root, max_depth=4)
    assert found.cut is not None and "deeper than 4 levels" in found.cut


def test_the_hash_is_that_of_the_tree_it_always_was(tmp_path: Path) -> None:
    # The same entries in the same format as before the scan: finished jobs are not re-run by an upgrade.
    import hashlib

    root = project(tmp_path)
    digest = hashlib.sha256()
    for line in (
        "F README.md - sha256:" + hashlib.sha256(b"# proj\n").hexdigest(),
        "D src",
        "F src/app.py - sha256:" + hashlib.sha256(b"print('hi')\n").hexdigest(),
    ):
        digest.update(line.encode() + b"\0")
    assert tree_hash(root) == "sha256:" + digest.hexdigest()
