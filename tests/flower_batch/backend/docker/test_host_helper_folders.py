"""The disk helpers' socket folders a helper removed by force left behind (gc removes the
container, so it never takes its socket with it) are swept at the next helper's start and by gc;
a live helper's, one starting right now and another user's are spared. No Docker."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower_batch.backend.docker import host_helper
from flower_batch.backend.docker.host_helper import FOLDER_PREFIX, SOCKET, START_S, sweep_stale_folders


def _folder(tmp: Path, name: str) -> Path:
    folder = tmp / f"{FOLDER_PREFIX}{name}"
    folder.mkdir(mode=0o700)
    return folder


@pytest.fixture
def tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A short temp folder of the test's own as the sweep's /tmp (a unix socket's path has a
    limit of 107 bytes, which a worker's tmp_path may pass)."""
    folder = Path(tempfile.mkdtemp(prefix="fbh-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_only_the_folders_no_helper_serves_are_swept(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path = tmp
    dead = _folder(tmp_path, "dead")  # a socket file nobody listens on: its helper removed by force
    gone = socket.socket(socket.AF_UNIX)
    gone.bind(str(dead / SOCKET))
    gone.close()
    live = _folder(tmp_path, "live")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(live / SOCKET))
    listening.listen(1)
    starting = _folder(tmp_path, "starting")  # no socket yet, made just now
    empty = _folder(tmp_path, "empty")  # a killed helper's: its socket taken, the folder left
    old = time.time() - 3 * START_S
    os.utime(empty, (old, old))
    theirs = _folder(tmp_path, "theirs")
    os.utime(theirs, (old, old))
    if os.getuid() == 0:
        os.chown(theirs, 4242, 4242)
    else:
        monkeypatch.setattr(host_helper.os, "getuid", lambda: os.getuid() + 1)  # then none is ours
    unrelated = tmp_path / "flower-batch-other"
    unrelated.mkdir()
    try:
        removed = sweep_stale_folders()
    finally:
        listening.close()
    if os.getuid() != 0:
        assert removed == []
        return
    assert sorted(removed) == sorted([dead, empty])
    assert live.is_dir() and starting.is_dir() and theirs.is_dir() and unrelated.is_dir()
    assert not dead.exists() and not empty.exists()
