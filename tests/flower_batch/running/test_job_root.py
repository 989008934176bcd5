"""The sandbox a job asks for: root, user, workdir and pass_reward in jobs.toml (one line each when
wrong), the container they make (a writable root, uid 0 with four capabilities, the workspace at
its workdir, the image's WORKDIR), a tar of the image's folder unpacked as hostile input, the
watchdog on a writable root's writes, and a state image's tag."""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from flower_batch.backend.base import Backend, ContainerSpec
from flower_batch.backend.confinement import ROOT_CAPABILITIES
from flower_batch.errors import FlowerBatchError, MatrixFileError
from flower_batch.jobmodel.spec import DEFAULT_DISK, JobSpec
from flower_batch.jobsfile import load_jobs_file
from flower_batch.running import root_watch
from flower_batch.running.job_root import HOST_ROOT, resolve_root
from flower_batch.running.state_image import state_ref
from flower_batch.running.workdir_seed import unpack_untrusted
from tests.fake_backend import FakeBackend

JOBS = """
[defaults]
prompt = "p"
workspace = "ws"
{defaults}

[tasks.a]
{task}
"""


def _load(tmp_path: Path, defaults: str = "", task: str = "") -> JobSpec:
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "jobs.toml").write_text(JOBS.format(defaults=defaults, task=task))
    (job,) = load_jobs_file(tmp_path / "jobs.toml").jobs
    return job


def test_the_fields_from_jobs_toml(tmp_path: Path) -> None:
    job = _load(tmp_path, 'root = "writable"\nuser = "root"', 'workdir = "/srv/app/"\npass_reward = 0.5')
    assert (job.root, job.user, job.workdir, job.pass_reward) == ("writable", "root", "/srv/app", 0.5)
    assert job.workspace_path == "/srv/app"
    plain = _load(tmp_path)
    assert (plain.root, plain.user, plain.workdir, plain.workspace_path) == (
        "read-only",
        "sandbox",
        None,
        "/workspace",
    )
    assert plain.inputs_hash("i") != job.inputs_hash("i")  # resume runs it again


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('root = "rw"', 'expected "read-only" (the default) or "writable"'),
        ('user = "admin"', 'expected "sandbox"'),
        ('workdir = "app"', "expected an absolute container path"),
        ('workdir = "/tmp/x"', "is reserved (the job's HOME (a tmpfs))"),
        ('workdir = "/opt/flower"', "is reserved (flower's runtime)"),
        ('workdir = "/a/../etc"', 'no "." or ".."'),
        ("pass_reward = nan", "expected a number like 1.0"),
        ('pass_reward = "1"', "expected a number like 1.0"),
    ],
)
def test_a_wrong_value_is_one_line_naming_the_field(tmp_path: Path, line: str, says: str) -> None:
    with pytest.raises(MatrixFileError) as caught:
        _load(tmp_path, task=line)
    text = str(caught.value)
    assert says in text and f"tasks.a.{line.split(' ')[0]}" in text and len(text.splitlines()) == 1, text


def _job(**changes: Any) -> JobSpec:
    base = JobSpec(id="j", task="t", variant="v", repeat=1, matrix={}, prompt="p", workflow=None)
    return JobSpec.from_dict({**base.to_dict(), **changes})


@pytest.mark.anyio
async def test_the_container_a_job_asks_for() -> None:
    backend = FakeBackend()
    backend.add_image("task:wd", workdir="/app")
    plain = await resolve_root(backend, _job(), "task:wd")
    spec = plain.applied(ContainerSpec(image="x", command=["true"]))
    assert spec.confinement.read_only_root and spec.confinement.cap_add == () and spec.user != "0:0"
    assert plain.workdir == "/workspace" and plain.note is None
    asked = await resolve_root(backend, _job(root="writable", user="root", workdir="image"), "task:wd")
    spec = asked.applied(ContainerSpec(image="x", command=["true"]))
    assert asked.workdir == "/app"  # the image's WORKDIR
    assert not spec.confinement.read_only_root and spec.user == "0:0" and spec.env["IS_SANDBOX"] == "1"
    assert spec.confinement.cap_add == ROOT_CAPABILITIES == ("CHOWN", "DAC_OVERRIDE", "SETUID", "SETGID")
    assert spec.disk_bytes == DEFAULT_DISK  # the job's disk, its default
    assert asked.note == f"writable root (its writes bounded at 10g); uid 0 ({HOST_ROOT})"
    bounded = await resolve_root(backend, _job(root="writable", disk=512 << 20), "task:wd")
    assert bounded.disk_bytes == 512 << 20 and bounded.note == "writable root (its writes bounded at 512m)"
    # an image with no WORKDIR works in /workspace; one whose WORKDIR is reserved is one line
    assert (await resolve_root(backend, _job(workdir="image"), FakeBackend.IMAGE)).workdir == "/workspace"
    backend.add_image("task:tmp", workdir="/tmp")
    with pytest.raises(FlowerBatchError, match=r"its image's WORKDIR /tmp is reserved"):
        await resolve_root(backend, _job(workdir="image"), "task:tmp")


def _tar(path: Path, entries: list[tuple[str, bytes | None, str]]) -> None:
    with tarfile.open(path, "w") as tar:
        for name, data, kind in entries:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            elif kind == "dev":
                info.type = tarfile.CHRTYPE
            elif kind == "exe":
                info.mode = 0o755
            info.size = len(data or b"")
            tar.addfile(info, io.BytesIO(data or b""))


def test_an_images_folder_is_unpacked_as_hostile_input(tmp_path: Path) -> None:
    tar, dest = tmp_path / "app.tar", tmp_path / "ws"
    dest.mkdir()
    _tar(
        tar,
        [
            ("app", None, "dir"),
            ("app/question.txt", b"q7\n", "file"),
            ("app/bin/run.sh", b"#!/bin/sh\n", "exe"),
            ("app/passwd", None, "link"),
            ("app/null", None, "dev"),
            ("app/../../escape.txt", b"x", "file"),
        ],
    )
    skipped = unpack_untrusted(tar, dest, limit_bytes=1 << 20)
    assert (dest / "question.txt").read_text() == "q7\n"
    assert (dest / "bin" / "run.sh").stat().st_mode & 0o111
    assert not (dest / "passwd").exists() and not (dest / "null").exists()
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path.parent / "escape.txt").exists()
    assert len(skipped) == 3, skipped
    with pytest.raises(FlowerBatchError, match="over 2 bytes"):
        unpack_untrusted(tar, tmp_path / "again", limit_bytes=2)


class _Writing:
    """An engine whose container has written 10 bytes more at every look."""

    def __init__(self) -> None:
        self.written, self.stopped = 0, False

    async def written_bytes(self, container_id: str) -> int:
        self.written += 10
        return self.written

    async def stop(self, container_id: str, grace_s: float = 10.0) -> None:
        self.stopped = True


@pytest.mark.anyio
async def test_the_watchdog_stops_a_job_over_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(root_watch, "WATCH_EVERY_S", 0.0)
    engine, over = _Writing(), root_watch.RootOver()
    with anyio.fail_after(5):
        await root_watch.watch_root(cast(Backend, engine), "c", 35, over)
    assert engine.stopped and over.written == 40 and over.limit == 35
    assert over.reason.startswith("stopped: the job wrote 40b into its writable root, over its bound of 35b")


def test_a_state_images_tag_is_valid_and_its_jobs_own() -> None:
    ref = state_ref("/home/a", "Batch One", "job/1" * 40)
    repository, tag = ref.split(":")
    assert repository == "flower-batch-state" and re.fullmatch(r"[a-z0-9_.-]{1,128}", tag), ref
    assert state_ref("/home/a", "b", "j") != state_ref("/home/b", "b", "j") != state_ref("/home/a", "b", "k")


@pytest.mark.anyio
async def test_a_wake_whose_state_image_is_gone_is_one_line(tmp_path: Path) -> None:
    from flower_batch.gateway.host.sidecar import GatewaySidecar
    from flower_batch.jobmodel.image import PinnedImage
    from flower_batch.jobmodel.record import JobRecord
    from flower_batch.jobmodel.spec import GatewaySpec
    from flower_batch.jobmodel.status import Status
    from flower_batch.layout import Home
    from flower_batch.running.runner import JobContext, run_job

    job = _job(root="writable", persistent=True, gateway={"mode": "replay"})
    previous = JobRecord(
        job_id="j", batch="b", inputs_hash="h", image_id=FakeBackend.IMAGE, status=Status.PAUSED, spec=job,
        state_image="sha256:" + "0" * 64,
    )  # fmt: skip
    async with FakeBackend() as backend:
        gw = GatewaySidecar(
            backend, batch="b", lease="s1", image_id=FakeBackend.IMAGE, batch_dir=tmp_path / "b",
            gateway=GatewaySpec(mode="replay"),
        )  # fmt: skip
        await backend.create_network(gw.network, {}, internal=True)
        ctx = JobContext(
            backend=backend, batch="b", lease="s1", image=PinnedImage(FakeBackend.IMAGE), gateway=gw
        )
        record = await run_job(
            ctx, job, Home(tmp_path / "home").job("b", "j"), waking=True, previous=previous
        )
    assert record.status is Status.ERROR and record.reason, record
    assert record.reason.startswith(
        "job j: its state image sha256:000000000000 is gone (`gc --images` removes them)"
    )
    assert record.state_image == previous.state_image  # still pinned: the record says what it needed
