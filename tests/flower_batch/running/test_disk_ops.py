"""Who does a job's disk's root-only steps (running/disk_ops.py): root itself, else the helper
container, each step one of its commands. The helper here is a fake that records the commands
(the real one: test_job_disk_not_root_on_docker.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from flower_batch.backend.base import HostHelper
from flower_batch.errors import BackendError
from flower_batch.running import disk_ops
from flower_batch.running.disk_ops import AS_ROOT, VIA_ENV, ViaHelper, choose_disk_ops
from tests.fake_backend import FakeBackend


class Helper(HostHelper):
    def __init__(self, answers: Mapping[str, tuple[int, str, str]] | None = None, fail: str = "") -> None:
        self.commands: list[list[str]] = []
        self.answers = dict(answers or {})
        self.fail = fail
        self.closed = False

    def run(self, argv: Sequence[str]) -> tuple[int, str, str]:
        if self.fail:
            raise BackendError(self.fail)
        self.commands.append(list(argv))
        return self.answers.get(argv[0], (0, "", ""))

    def close(self) -> None:
        self.closed = True


class LocalEngine(FakeBackend):
    """An engine on this machine, whose helper is `helper`."""

    def __init__(self, helper: Helper) -> None:
        super().__init__()
        self.helper = helper
        self.asked: list[tuple[str, dict[str, str], str]] = []

    @property
    def mounts_devices(self) -> bool:
        return True

    def host_helper(self, image: str, labels: Mapping[str, str], name: str) -> HostHelper:
        self.asked.append((image, dict(labels), name))
        return self.helper


def test_root_does_it_itself_and_anyone_else_through_the_engines_helper(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = LocalEngine(Helper())
    monkeypatch.setattr(disk_ops.os, "getuid", lambda: 0)
    assert choose_disk_ops(engine, image="img", labels={}, name="h", environ={}) is AS_ROOT
    # the bench's way to measure it as root
    via = choose_disk_ops(engine, image="img", labels={}, name="h", environ={VIA_ENV: "helper"})
    assert isinstance(via, ViaHelper)
    monkeypatch.setattr(disk_ops.os, "getuid", lambda: 1000)
    ops = choose_disk_ops(engine, image="img", labels={"k": "v"}, name="h", environ={})
    assert isinstance(ops, ViaHelper) and engine.asked == []  # nothing asked of the engine yet
    assert ops.problem() is None and engine.asked == [("img", {"k": "v"}, "h")]
    assert engine.helper.commands == [["true"]]
    # an engine that cannot mount a device never gets to the helper (disk_problem says why)
    assert choose_disk_ops(FakeBackend(), image="img", labels={}, name="h", environ={}) is AS_ROOT


def test_each_step_is_one_command_of_the_helper_and_the_copy_is_handed_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    helper = Helper({"losetup": (0, "/dev/loop7\n", ""), "stat": (0, "2049\n66\n", "")})
    ops = ViaHelper(LocalEngine(helper), "img", {}, "h")
    image = tmp_path / "disk.img"
    assert ops.attach_loop(image) == ("/dev/loop7", None)  # no descriptor: detached at release
    assert ops.devices([tmp_path / "a", tmp_path]) == [2049, 66]
    ops.make_dirs([tmp_path / "a", tmp_path / "b"])
    monkeypatch.setattr(disk_ops.os, "getuid", lambda: 1000)
    monkeypatch.setattr(disk_ops.os, "getgid", lambda: 1001)
    ops.hand_back(tmp_path / "out")
    assert helper.commands == [
        ["losetup", "--find", "--show", str(image)],
        ["stat", "-L", "-c", "%d", str(tmp_path / "a"), str(tmp_path)],
        ["mkdir", "-p", str(tmp_path / "a"), str(tmp_path / "b")],
        ["chown", "-R", "--no-dereference", "1000:1001", str(tmp_path / "out")],
    ]
    ops.close()
    assert helper.closed


def test_a_helper_that_cannot_start_is_one_line_and_the_steps_fail_as_commands(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(disk_ops.os, "getuid", lambda: 1000)
    helper = Helper(
        fail="the disk helper container could not start:\nDocker refused to operate on container h"
    )
    ops = ViaHelper(LocalEngine(helper), "img", {}, "h")
    problem = ops.problem()
    assert problem == (
        "not root, and the disk helper container could not start: Docker refused to operate on container h"
    )
    assert ops.problem() == problem  # said once, not tried at every job
    done = ops.run(["umount", "/x"])
    assert done.returncode != 0 and "could not start" in done.stderr
    with pytest.raises(OSError, match="could not start"):
        ops.devices([tmp_path])
    with pytest.raises(Exception, match="no loop device for the job's disk"):
        ops.attach_loop(tmp_path / "disk.img")
