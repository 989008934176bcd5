"""A job's files read as hostile input: no symlink followed out, nothing but regular files opened,
reads capped, trees walked without recursion and bounded, what was skipped named."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from flower_batch.untrusted_files import NotRegular, copy_tree, open_file, read_head, read_tail, shown, walk
from tests.hostile_fixtures import (
    NEWLINE_NAME,
    NOT_UTF8,
    SECRET,
    deep_tree,
    hostile_workspace,
    outside_secret,
    remove_deep,
    wide_tree,
)


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    ws = tmp_path / "job" / "workspace"
    return ws, hostile_workspace(ws, outside_secret(tmp_path / "outside"))


def test_only_regular_files_open_and_each_refusal_says_why(hostile) -> None:
    ws, kinds = hostile
    with open_file(ws, "plain.txt") as f:
        assert f.read() == b"fine\n"
    started = time.monotonic()
    for name, kind in kinds.items():
        with pytest.raises(NotRegular) as caught:
            read_head(ws, name, 100)
        assert caught.value.why.startswith(kind), name
    assert time.monotonic() - started < 2  # the FIFO's open did not wait for a writer
    with pytest.raises(NotRegular, match="symlink -> "):
        read_head(ws, "dir-link/passwd", 100)  # a symlink on the way is refused too
    with pytest.raises(NotRegular, match="not a plain relative path"):
        read_head(ws, "../../outside/passwd", 100)
    with pytest.raises(FileNotFoundError):
        read_head(ws, "absent.txt", 100)
    assert isinstance(NotRegular("x", "fifo", "x"), OSError)  # `except OSError` readers skip it


def test_reads_are_capped(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"a" * 1000 + b"z" * 1000)
    head = read_head(tmp_path, "big", 100)
    assert head.data == b"a" * 100 and head.cut and head.size == 2000
    assert head.text("big").endswith("(1900 more bytes of big not read)")
    tail = read_tail(tmp_path, "big", 100)
    assert tail.data == b"z" * 100 and tail.cut
    assert not read_head(tmp_path, "big", 5000).cut


def test_walk_lists_every_kind_without_following_and_names_are_shown_escaped(hostile) -> None:
    ws, kinds = hostile
    tree = walk(ws)
    got = {shown(rel): e.kind for rel, e in tree.entries.items()}
    assert got == {**kinds, "plain.txt": "file", "caf\\xe9.txt": "file", "two\\nlines.txt": "file"}
    assert "dir-link/passwd" not in {shown(r) for r in tree.entries}  # the symlinked dir is not entered
    assert tree.entries["passwd-link"].target is not None and not tree.truncated
    assert shown(os.fsdecode(NOT_UTF8)) == "caf\\xe9.txt" and shown(NEWLINE_NAME) == "two\\nlines.txt"
    json.dumps(sorted(got)).encode("utf-8")  # every shown name encodes


def test_a_5000_deep_tree_walks_bounded(tmp_path: Path) -> None:
    deep_tree(tmp_path / "ws", 5000)
    try:
        started = time.monotonic()
        tree = walk(tmp_path / "ws", max_depth=64)
        assert time.monotonic() - started < 5
        assert tree.entries == {} and len(tree.dirs) == 63
        [(rel, why)] = tree.skipped
        assert rel.count("/") == 63 and "deeper than" in why
    finally:
        remove_deep(tmp_path / "ws")


@pytest.mark.slow  # making 100,000 files takes 15 s here
def test_100000_files_walk_bounded(tmp_path: Path) -> None:
    wide_tree(tmp_path / "ws", 100_000)
    started = time.monotonic()
    tree = walk(tmp_path / "ws", max_entries=20_000)
    assert time.monotonic() - started < 5
    assert tree.truncated and len(tree.entries) + len(tree.dirs) <= 20_000


def test_copy_tree_keeps_symlinks_as_symlinks_and_skips_specials(hostile, tmp_path: Path) -> None:
    ws, kinds = hostile
    (ws / "sub").mkdir()
    (ws / "sub" / "code.py").write_text("print(1)\n")
    (ws / "empty").mkdir()
    dest = tmp_path / "copy"
    started = time.monotonic()
    skipped = dict(copy_tree(ws, dest))
    assert time.monotonic() - started < 2
    assert skipped == {name: kind for name, kind in kinds.items() if kind != "symlink"}
    assert (dest / "sub" / "code.py").read_text() == "print(1)\n" and (dest / "empty").is_dir()
    assert (dest / "passwd-link").is_symlink() and os.readlink(dest / "etc-link") == "/etc/passwd"
    assert (dest / NEWLINE_NAME).is_file() and os.path.isfile(os.fsencode(dest) + b"/" + NOT_UTF8)
    assert SECRET not in "".join(p.read_text() for p in dest.rglob("*") if p.is_file() and not p.is_symlink())


def test_remove_tree_takes_any_depth_and_never_follows_a_link(tmp_path: Path) -> None:
    from flower_batch.untrusted_files import remove_tree
    from tests.hostile_fixtures import deep_tree

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("kept\n")
    job = tmp_path / "job"
    deep_tree(job / "deep", 5000)  # shutil.rmtree: RecursionError
    (job / "link").symlink_to(outside)
    (job / "deep" / "d" / "link").symlink_to(outside)
    os.mkfifo(job / "pipe")
    remove_tree(job)
    assert not job.exists() and (outside / "keep.txt").read_text() == "kept\n"
    remove_tree(job)  # gone already: nothing to do
