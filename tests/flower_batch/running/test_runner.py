"""run_job's failures end as records, never tracebacks: a workspace that cannot be copied, a
container that never stops; Ctrl-C stops the container and leaves an 'interrupted' record; the
record is written before the container exists, with its id once created, and at the end; the
job's and the check's containers share one shape (FakeBackend, no Docker)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flower_batch.jobmodel.image import PinnedImage
from flower_batch.running.bundle import TOOLS_PATH


def _spec(job_id: str, mode: str = "anthropic"):
    from flower_batch.jobmodel.spec import GatewaySpec, JobSpec

    return JobSpec(
        id=job_id, task="t", variant="v", repeat=1, matrix={}, prompt="hi", gateway=GatewaySpec(mode=mode)
    )


async def _run_one(tmp_path: Path, backend, job, on_state=None) -> object:  # type: ignore[no-untyped-def]
    from flower_batch.gateway.host.sidecar import GatewaySidecar
    from flower_batch.jobmodel.spec import GatewaySpec
    from flower_batch.layout import Home
    from flower_batch.running.runner import JobContext, run_job
    from tests.fake_backend import FakeBackend

    gw = GatewaySidecar(
        backend,
        batch="b",
        lease="s1",
        image_id=FakeBackend.IMAGE,
        batch_dir=tmp_path / "b",
        gateway=GatewaySpec(mode="replay"),
    )
    await backend.create_network(gw.network, {}, internal=True)
    ctx = JobContext(
        backend=backend,
        batch="b",
        lease="s1",
        image=PinnedImage(FakeBackend.IMAGE),
        gateway=gw,
        on_state=on_state,
    )
    return await run_job(ctx, job, Home(tmp_path / "home").job("b", job.id))


@pytest.mark.anyio
async def test_a_job_whose_workspace_cannot_be_copied_failed_on_its_input_with_a_record(
    tmp_path: Path,
) -> None:
    from dataclasses import replace

    from flower_batch.jobmodel.record import read_record
    from flower_batch.layout import Home
    from tests.fake_backend import FakeBackend

    job = replace(_spec("gone", mode="replay"), workspace=tmp_path / "no-such-workspace")
    async with FakeBackend() as backend:
        record = await _run_one(tmp_path, backend, job)
    on_disk = read_record(Home(tmp_path / "home").job("b", "gone").record_path)
    # The job's input, like a workflow that does not import: a verdict, never retried as infrastructure.
    assert on_disk.status == "failed" and on_disk.finished and on_disk == record
    assert on_disk.failure_class == "agent"
    assert "no-such-workspace" in (on_disk.reason or "") and "\n" not in (on_disk.reason or "")


@pytest.mark.anyio
async def test_a_container_that_never_stops_ends_error_not_a_traceback(tmp_path: Path) -> None:
    from tests.fake_backend import FakeBackend, Script

    class Stuck(FakeBackend):
        async def wait(self, container_id: str, timeout: float | None = None) -> int:
            raise TimeoutError

    job = replace_timeout(_spec("stuck", mode="replay"), 0.05)
    async with Stuck(default=Script(duration_s=0.01)) as backend:
        record = await _run_one(tmp_path, backend, job)
    assert record.status == "error"  # type: ignore[attr-defined]
    assert "did not stop" in (record.reason or "")  # type: ignore[attr-defined]


def replace_timeout(job, seconds: float):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    return replace(job, timeout_s=seconds)


@pytest.mark.anyio
async def test_ctrl_c_stops_the_container_saves_its_log_and_records_interrupted(tmp_path: Path) -> None:
    import anyio

    from flower_batch.errors import ContainerNotFound
    from flower_batch.jobmodel.record import read_record
    from flower_batch.layout import Home
    from tests.fake_backend import FakeBackend, FakeProcess

    working = anyio.Event()
    seen: list[FakeProcess] = []

    async def flower(proc: FakeProcess) -> int:  # works until a signal, as flower does
        proc.trap("SIGTERM")
        seen.append(proc)
        proc.log("working")
        working.set()
        await proc.next_signal()
        proc.log("stopping: step recorded")
        return 143

    states: list[tuple[str, str]] = []
    async with FakeBackend(programs={"flower": flower}) as backend:
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                _run_one,
                tmp_path,
                backend,
                _spec("c", mode="replay"),
                lambda job, state: states.append((job, state)),
            )
            await working.wait()
            tg.cancel_scope.cancel()
        jd = Home(tmp_path / "home").job("b", "c")
        record = read_record(jd.record_path)
        assert record.container is not None
        with pytest.raises(ContainerNotFound):
            await backend.inspect(record.container)  # removed
    assert record.status == "error" and record.reason == "interrupted: the orchestrator was stopped"
    assert record.finished_at and record.duration_s is not None and record.attempt == 1
    assert seen[0].signals == [15]  # stopped the way a timeout stops it: SIGTERM first
    log = (jd.logs / "container.log").read_text()
    assert "working" in log and "stopping: step recorded" in log
    assert states == [("c", "running"), ("c", "interrupted")]


@pytest.mark.anyio
async def test_the_record_is_written_before_create_after_create_and_at_the_end(tmp_path: Path) -> None:
    from dataclasses import replace

    from flower_batch.backend.base import ContainerSpec
    from flower_batch.jobmodel.record import read_record
    from flower_batch.labels import ROLE
    from flower_batch.layout import FLOWS, RUNS, WORKSPACE, Home
    from tests.fake_backend import FakeBackend

    path = Home(tmp_path / "home").job("b", "w").record_path
    # (call, the record's status, the record's container, the call's container)
    seen: list[tuple[str, str, str | None, str]] = []
    specs: list[ContainerSpec] = []

    class Watching(FakeBackend):
        async def create(self, spec: ContainerSpec) -> str:
            specs.append(spec)
            on_disk = read_record(path)
            cid = await super().create(spec)
            seen.append(("create", on_disk.status, on_disk.container, cid))
            return cid

        async def start(self, container_id: str) -> None:
            on_disk = read_record(path)
            seen.append(("start", on_disk.status, on_disk.container, container_id))
            await super().start(container_id)

    job = replace(
        _spec("w", mode="replay"),
        check="test -d /workspace",
        cpus=1.5,
        memory_bytes=256 * 2**20,
        placement=("node.labels.pool==big",),
    )
    async with Watching() as backend:
        record = await _run_one(tmp_path, backend, job)
    job_cid, check_cid = seen[0][3], seen[2][3]
    assert seen == [
        ("create", "running", None, job_cid),
        ("start", "running", job_cid, job_cid),
        # the check's container: the record is not written again until the end
        ("create", "running", job_cid, check_cid),
        ("start", "running", job_cid, check_cid),
    ]
    assert read_record(path) == record and record.status == "passed"  # type: ignore[attr-defined]
    assert record.container == job_cid and record.finished_at  # type: ignore[attr-defined]
    for stamp in (record.queued_at, record.started_at, record.finished_at):  # type: ignore[attr-defined]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", stamp)  # to the second, UTC

    run, check = specs
    shared = ("image", "user", "cpus", "memory", "network", "working_dir", "placement")
    assert [getattr(run, f) for f in shared] == [getattr(check, f) for f in shared]
    assert run.memory == 256 * 2**20 and run.cpus == 1.5 and run.working_dir == WORKSPACE
    assert [(m.target, m.read_only) for m in run.mounts] == [(WORKSPACE, False), (RUNS, False), (FLOWS, True)]
    assert [(m.target, m.read_only) for m in check.mounts] == [(WORKSPACE, False), (RUNS, True)]
    assert run.mounts[0] == check.mounts[0]
    assert (run.labels[ROLE], check.labels[ROLE]) == ("job", "check")
    assert run.placement == ["node.labels.pool==big"]  # the check too: it runs where its job may (issue 13)
    assert check.command == ["sh", "-c", "test -d /workspace"]
    # the runtime image's own PATH, not flower's venv: the check's python3 is the image's
    assert check.env == {"PATH": TOOLS_PATH, "HOME": "/tmp", "FLOWER_BATCH_JOB": "w"}
    assert (
        run.command[0] == "/opt/flower/bin/flower"
        and run.env["FLOWER_BATCH_JOB"] == "w"
        and run.env["FLOWER_RUN_STAMP"]
    )


@pytest.mark.anyio
async def test_ctrl_c_during_the_check_records_interrupted_and_keeps_what_the_job_did(tmp_path: Path) -> None:
    from dataclasses import replace

    import anyio

    from flower_batch.jobmodel.record import read_record
    from flower_batch.labels import ROLE
    from flower_batch.layout import Home
    from tests.fake_backend import FakeBackend, FakeProcess, Script

    checking = anyio.Event()

    async def check(proc: FakeProcess) -> int:  # a verifier that takes its time
        checking.set()
        await anyio.sleep(600)
        return 0

    states: list[tuple[str, str]] = []
    job = replace(_spec("v", mode="replay"), check="sh verify.sh")
    async with FakeBackend(programs={"flower": Script(duration_s=0.01, exit_code=0), "sh": check}) as backend:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_run_one, tmp_path, backend, job, lambda job, state: states.append((job, state)))
            await checking.wait()
            tg.cancel_scope.cancel()
        assert await backend.list_by_label({ROLE: "check"}) == []  # the check's container is removed
        jd = Home(tmp_path / "home").job("b", "v")
        record = read_record(jd.record_path)
    assert record.status == "error" and record.reason == "interrupted: the orchestrator was stopped"
    assert (
        record.finished_at and record.exit_code == 0 and record.container is not None
    )  # the job's, which ended
    assert (jd.logs / "container.log").exists()  # the job's log, not overwritten by a stop
    assert states == [("v", "running"), ("v", "checking"), ("v", "interrupted")]


@pytest.mark.anyio
async def test_the_workspace_copy_runs_off_the_event_loop_and_stops_with_the_command(tmp_path: Path) -> None:
    import time
    from dataclasses import replace

    import anyio

    from flower_batch.layout import Home
    from flower_batch.running.runner import prepare_off_the_loop

    ws = tmp_path / "ws"
    ws.mkdir()
    files = 8000
    for i in range(files):
        (ws / f"f{i:05}").write_bytes(b"x" * 512)
    jd = Home(tmp_path / "home").job("b", "copy")
    job = replace(_spec("copy"), workspace=ws)
    ticks, cancel_asked = 0, 0.0
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def beat() -> None:  # the event loop keeps answering while the copy runs
                nonlocal ticks, cancel_asked
                while True:
                    ticks += 1
                    if jd.workspace.is_dir() and any(jd.workspace.iterdir()):
                        cancel_asked = time.monotonic()
                        scope.cancel()  # the command stops (Ctrl-C, SIGTERM) mid-copy
                    await anyio.sleep(0.001)

            tg.start_soon(beat)
            await prepare_off_the_loop(jd, job, fresh=True)
    assert scope.cancelled_caught and ticks > 1
    assert time.monotonic() - cancel_asked < 0.5  # answered at once, not after the copy
    counts = [len(list(jd.workspace.iterdir()))]
    while True:  # the abandoned thread stops at its next file: the count settles below all of them
        await anyio.sleep(0.05)
        counts.append(len(list(jd.workspace.iterdir())))
        if counts[-1] == counts[-2]:
            break
    assert counts[-1] < files


@pytest.mark.parametrize("on_cluster", [False, True], ids=["one-machine", "cluster"])
def test_a_task_image_gets_flower_from_the_volume_here_and_from_its_layered_copy_on_a_cluster(
    tmp_path: Path, on_cluster: bool
) -> None:
    from dataclasses import replace

    from flower_batch.gateway.host.sidecar import GatewaySidecar
    from flower_batch.jobmodel.environment import TaskImage
    from flower_batch.jobmodel.spec import GatewaySpec
    from flower_batch.layout import Home
    from flower_batch.running.bundle import BUNDLE_PATH
    from flower_batch.running.runner import JobContext, check_container_spec, job_container_spec
    from tests.fake_backend import FakeBackend

    layered = "reg:5000/flower-batch-task@sha256:" + "5" * 64 if on_cluster else None
    task_image = TaskImage("sha256:" + "4" * 64, "image", "debian:13", layered=layered)
    job = replace(_spec("t", mode="replay"), check="true", task_image=task_image)
    backend = FakeBackend()
    gateway = GatewaySidecar(
        backend, batch="b", lease="s1", image_id=FakeBackend.IMAGE, batch_dir=tmp_path / "b",
        gateway=GatewaySpec(mode="replay"),
    )  # fmt: skip
    ctx = JobContext(
        backend=backend,
        batch="b",
        lease="s1",
        image=PinnedImage(FakeBackend.IMAGE),
        gateway=gateway,
        bundle=None if on_cluster else "flower-runtime-0123456789abcdef",
    )
    jd = Home(tmp_path / "home").job("b", "t")
    run = job_container_spec(ctx, job, jd, ["flower"], "stamp")
    check = check_container_spec(ctx, job, jd)
    assert run.image == check.image == (layered or task_image.id)
    bundles = [(m.source, m.kind, m.read_only) for m in run.mounts if m.target == BUNDLE_PATH]
    # on a cluster the image holds flower itself: no volume (a volume stays on its node)
    assert bundles == ([] if on_cluster else [("flower-runtime-0123456789abcdef", "volume", True)])
    assert "PATH" not in run.env and "PATH" not in check.env  # the image's own PATH either way
