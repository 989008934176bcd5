"""Per-job overhead of `flower-batch run`, measured in one run of this script.

Three ways to run the same trivial job (one step, one model turn against the scripted model),
each `--repeat` times, one after another:

  floor      `docker run --rm IMAGE true`: the engine's own cost of a container
  raw        `docker run --rm` of the same `flower ... run` command flower-batch starts, by hand,
             as the same uid: model server on the host network, no gateway, no record, no
             labels (and, for reference, as the invoking uid: root pays no non-root lookup cost)
  orchestr.  `flower-batch run WS -f bench_flow.py:main --scenario bench.toml` (gateway sidecar
             on a private network, per-job token, job folder and record, logs, cleanup)

Printed: the median wall time of each and the ratios orchestr./floor, orchestr./raw and
raw/floor. Also (issue 5): `wake` to its first model request vs a cold `run` to its first
model request, and an image rebuild with no change. And where the extra time of a job goes
(issue 22): the flower-batch process's own start-up (`run --help`: Python and imports), the
time to the first model request (raw vs run: start-up, pre-flight, gateway, container) and
the time from it to the command's end (the job's turn, then records and cleanup). And a job's
own disk (issue 36): what attaching it adds before the job's container can be created (the ext4
image made from the job's folders, its loop device, the engine's volume and its folders; goal:
under 0.3 s), and what measuring, copying back and releasing it adds after the job: as root, and
through the helper container an orchestrator that is not root uses (its start, once a run, apart).
Nothing here is asserted: the figures are for the reader.

    .venv/bin/python bench/overhead.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.pingjob import FLOW, SCENARIO, raw_command  # noqa: E402
from flower.scripted import ScriptedServer  # noqa: E402
from flower_batch.backend.confinement import hand_over, sandbox_user  # noqa: E402
from flower_batch.running.image import build_image  # noqa: E402

FB = ROOT / ".venv" / "bin" / "flower-batch"


def timed(fn: Callable[[], object]) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise SystemExit(f"bench: {' '.join(cmd[:4])} ... exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return proc


def lines_in(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def first_request_after(log: Path, t0: float, skip: int = 0) -> float:
    """Seconds from t0 (epoch) to the first /v1/messages request logged after line `skip`."""
    for line in log.read_text().splitlines()[skip:]:
        record = json.loads(line)
        if record.get("endpoint") == "messages":
            return record["time"] - t0
    raise SystemExit(f"bench: no model request in {log}")


def disk_cost(
    image_id: str, repeat: int, tmp: Path, *, helper: bool
) -> tuple[float, list[float], list[float]] | None:
    """Seconds to attach a job's own disk (on the job's path to its container) and to detach it
    (after the job), `repeat` times, for a small workspace; None where no disk can be made.
    `helper`: through the helper container, as an orchestrator that is not root does it (forced
    as root with FLOWER_BATCH_DISK_VIA=helper), with the seconds its start took (once a run)."""
    import anyio

    from flower_batch.backend.docker.backend import DockerBackend
    from flower_batch.labels import labels
    from flower_batch.layout import JobDir
    from flower_batch.running import job_disk
    from flower_batch.running.disk_ops import VIA_ENV, choose_disk_ops

    async def measure() -> tuple[float, list[float], list[float]] | None:
        async with DockerBackend() as backend:
            if (why := job_disk.disk_problem(backend)) is not None:
                print(f"  a job's own disk: not measured ({why})")
                return None
            ops = choose_disk_ops(
                backend, image=image_id, labels=labels("bench", "bench", "disk-helper"),
                name=f"fb-bench-disk-helper-{os.getpid()}", environ={VIA_ENV: "helper"} if helper else {},
            )  # fmt: skip
            try:
                t0 = time.monotonic()
                if (why := await anyio.to_thread.run_sync(ops.problem)) is not None:
                    print(f"  a job's own disk through the helper: not measured ({why})")
                    return None
                start = time.monotonic() - t0
                attach: list[float] = []
                detach: list[float] = []
                for i in range(repeat):
                    jd = JobDir("bench", f"d{i}", tmp / "disk" / f"d{i}-{helper}")
                    jd.make()
                    (jd.workspace / "README").write_text("bench\n")
                    hand_over(jd.root)
                    t0 = time.monotonic()
                    disk = await job_disk.attach(
                        backend, jd=jd, size=10 * 1024**3, batch="bench", lease="bench",
                        name=f"fb-bench-disk-{os.getpid()}-{i}", ops=ops,
                    )  # fmt: skip
                    attach.append(time.monotonic() - t0)
                    t0 = time.monotonic()
                    await job_disk.detach(backend, disk, jd)
                    detach.append(time.monotonic() - t0)
                return start, attach, detach
            finally:
                await anyio.to_thread.run_sync(ops.close)

    return anyio.run(measure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each kind (median reported)")
    args = parser.parse_args()

    t0 = time.monotonic()
    image = build_image(log=lambda line: None)
    first_build = time.monotonic() - t0
    rebuild = timed(lambda: build_image(log=lambda line: None))

    tmp = Path(tempfile.mkdtemp(prefix="fb-overhead-"))
    try:
        ws = tmp / "ws"
        ws.mkdir()
        (ws / "README").write_text("bench\n")
        (tmp / "bench_flow.py").write_text(FLOW)
        (tmp / "bench.toml").write_text(SCENARIO)
        home = tmp / "home"
        env = {**os.environ, "TERM": "dumb"}
        env.pop("FLOWER_BATCH_HOME", None)

        floor = [timed(lambda: run(["docker", "run", "--rm", image.id, "true"])) for _ in range(args.repeat)]

        flows = tmp / "flows"
        flows.mkdir()
        shutil.copyfile(tmp / "bench_flow.py", flows / "bench_flow.py")
        # raw: as the uid flower-batch runs a job as (the same job); as_me: as the invoking uid
        # (root here), what a user's own `docker run` would do. On a storage driver where a
        # non-root uid pays for path lookups (fuse-overlayfs), the two differ by a second.
        raw: list[float] = []
        as_me: list[float] = []
        to_first_raw: list[float] = []
        raw_log = tmp / "raw.jsonl"
        job_user, my_user = sandbox_user(), f"{os.getuid()}:{os.getgid()}"
        with ScriptedServer(tmp / "bench.toml", host="0.0.0.0", log_path=raw_log) as srv:
            for i in range(args.repeat):
                users = [(job_user, raw)] + ([(my_user, as_me)] if my_user != job_user else [])
                for user, times in users:
                    job = tmp / "raw" / f"j{i}-{user.replace(':', '-')}"
                    shutil.copytree(ws, job / "workspace")
                    (job / "runs").mkdir(parents=True)
                    hand_over(job)
                    seen, started = lines_in(raw_log), time.time()
                    command = raw_command(image.id, str(job), str(flows), srv.port, user, "bench_flow")
                    times.append(timed(lambda command=command: run(command)))
                    if user == job_user:
                        to_first_raw.append(first_request_after(raw_log, started, skip=seen))

        # the flower-batch process alone: Python, its imports, the app (no engine call)
        startup = [timed(lambda: run([str(FB), "run", "--help"], env=env)) for _ in range(args.repeat)]

        orchestrated: list[float] = []
        to_first_cold: list[float] = []
        for i in range(args.repeat):
            started = time.time()
            orchestrated.append(
                timed(
                    lambda i=i: run(
                        [
                            str(FB),
                            "run",
                            str(ws),
                            "-f",
                            f"{tmp / 'bench_flow.py'}:main",
                            "--scenario",
                            str(tmp / "bench.toml"),
                            "--name",
                            f"o{i}",
                            "--image",
                            image.id,
                            "--home",
                            str(home),
                            *(["--persistent"] if i == 0 else []),
                        ],
                        env=env,
                    )
                )
            )
            to_first_cold.append(
                first_request_after(home / "adhoc" / f"o{i}" / "logs" / "gateway.jsonl", started)
            )

        # wake the first (persistent) job: time to its first model request in the new container
        to_first_wake: list[float] = []
        wake_total: list[float] = []
        log = home / "adhoc" / "o0" / "logs" / "gateway.jsonl"
        for _ in range(args.repeat):
            seen = len(log.read_text().splitlines())
            started = time.time()
            wake_total.append(timed(lambda: run([str(FB), "wake", "o0", "--home", str(home)], env=env)))
            to_first_wake.append(first_request_after(log, started, skip=seen))
        disk = disk_cost(image.id, args.repeat, tmp, helper=False) if os.getuid() == 0 else None
        helped = disk_cost(image.id, args.repeat, tmp, helper=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    med = statistics.median
    f, r, o = med(floor), med(raw), med(orchestrated)
    print(
        f"per-job overhead, median of {args.repeat} "
        f"(image {image.id[:19]}, scripted model, {os.cpu_count()} cpus)"
    )
    print(f"  docker run --rm IMAGE true          {f:6.2f} s")
    print(f"  docker run --rm IMAGE flower run    {r:6.2f} s   (one step, one model turn, as uid {job_user})")
    if job_user != my_user:
        print(
            f"    the same as uid {my_user}           {med(as_me):6.2f} s   (the storage driver's cost of a "
            f"non-root uid: {r - med(as_me):+.2f} s)"
        )
    print(f"  flower-batch run                    {o:6.2f} s   (same job: gateway, record, logs, cleanup)")
    print(f"  ratio flower-batch / docker true    {o / f:6.1f}x")
    print(f"  ratio flower-batch / raw flower     {o / r:6.2f}x   (+{o - r:.2f} s per job)")
    print(f"  ratio raw flower / docker true      {r / f:6.1f}x")
    print(
        f"  to first model request: cold run {med(to_first_cold):.2f} s, wake {med(to_first_wake):.2f} s"
        f"   (wake total {med(wake_total):.2f} s)"
    )
    print(f"  ratio wake / cold run to first request {med(to_first_wake) / med(to_first_cold):6.2f}x")
    fr, fo = med(to_first_raw), med(to_first_cold)
    print("  where flower-batch's extra time goes (medians):")
    print(f"    its process start-up (run --help)   {med(startup):6.2f} s")
    print(f"    to first model request: raw {fr:5.2f} s, run {fo:5.2f} s   (+{fo - fr:.2f} s)")
    print(
        f"    first request to exit:  raw {r - fr:5.2f} s, run {o - fo:5.2f} s   (+{o - fo - (r - fr):.2f} s)"
    )
    if disk is not None:
        print(
            f"  a job's own disk (10g, small workspace), as root: attach {med(disk[1]):.3f} s before the "
            f"container (goal < 0.3 s; max {max(disk[1]):.3f} s), detach {med(disk[2]):.3f} s after the job"
        )
    if helped is not None:
        print(
            f"  the same through the helper container (not root, the docker group): attach "
            f"{med(helped[1]):.3f} s (max {max(helped[1]):.3f} s), detach {med(helped[2]):.3f} s; "
            f"the helper's start, once a run: {helped[0]:.3f} s"
        )
    print(
        f"  image build: {first_build:.1f} s this time ({'reused' if image.reused else 'built'}), "
        f"rebuild with no change {rebuild:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
