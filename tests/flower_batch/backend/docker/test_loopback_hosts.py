"""The hosts file of a no-network container: readable by the sandbox's uid whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower_batch.backend.docker.backend import DockerBackend
from flower_batch.backend.docker.loopback_hosts import HOSTS, cache_folder, loopback_hosts_file


@pytest.fixture
def strict_umask() -> Iterator[None]:
    old = os.umask(0o077)  # CI's clone had it: a file of the checkout came out 0600
    try:
        yield
    finally:
        os.umask(old)


def test_the_file_is_readable_by_all_under_umask_077(tmp_path: Path, strict_umask: None) -> None:
    path = loopback_hosts_file(tmp_path / "cache")
    assert path is not None and path.read_text() == HOSTS
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_a_changed_or_planted_file_is_replaced_never_followed(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    path = loopback_hosts_file(folder)
    assert path is not None
    path.chmod(0o644)
    path.write_text("10.0.0.1 localhost\n")
    assert loopback_hosts_file(folder) == path and path.read_text() == HOSTS
    secret = tmp_path / "host-file"
    secret.write_text("not for a job\n")
    path.unlink()
    path.symlink_to(secret)  # the engine would mount what a link points to
    assert loopback_hosts_file(folder) == path
    assert not path.is_symlink() and path.read_text() == HOSTS and secret.read_text() == "not for a job\n"


def test_where_no_file_can_be_written_the_engine_keeps_its_sandbox(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert loopback_hosts_file(blocked / "cache") is None
    local = "unix:///var/run/docker.sock"
    assert DockerBackend(base_url=local, hosts_folder=blocked / "cache")._hosts_file is None
    assert DockerBackend(base_url=local)._hosts_file is None  # no folder given: none written
    folder = tmp_path / "cache"
    assert DockerBackend(base_url=local, hosts_folder=folder)._hosts_file == folder / "loopback_hosts"
    assert DockerBackend(base_url="tcp://10.0.0.2:2375", hosts_folder=folder)._hosts_file is None


def test_the_cache_folder_follows_xdg_then_home() -> None:
    assert cache_folder({"XDG_CACHE_HOME": "/c", "HOME": "/h"}) == Path("/c/flower-batch")
    assert cache_folder({"XDG_CACHE_HOME": "", "HOME": "/h"}) == Path("/h/.cache/flower-batch")
    assert cache_folder({}) is None
