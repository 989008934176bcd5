"""The same 32-job matrix on the local Docker engine and on the 3-node test swarm, in one run.

Three sides: the local engine, the swarm with its jobs' overlay network kept up on every node
(`SwarmBackend.warm_networks`, the default) and the swarm without (`swarm-cold`, as before).
Printed for each: wall time of the whole matrix, and the scheduling latency from submit (the
`start` call) to the engine reporting the task running, p50 and p95; then the wall-time ratio.
The swarm's nodes are containers on this same machine, so the ratio is the cost of going
through a cluster (services, overlay network, shared-storage probe, polling the manager), not a
speed-up: on real machines each node adds its own cores.

A fourth side, `engine` (last by default: the swarm sides have pulled the image onto every node
by then; first, it pays the pulls, ~28 s), is the cluster's own floor for that latency: bare
`docker service create` of the runtime image (`sleep`, one replica, no restart, no network, no
mount), as many as jobs, `--parallel` at a time, each timed from its create call to its task
reported running (polled every 50 ms), then removed. No flower-batch code runs on that side.

Needs the test cluster up with the runtime image pushed (`make cluster-up cluster-push`).

    .venv/bin/python bench/cluster.py [--jobs 32] [--parallel 8] [--image REF]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flower_batch.backend.base import Backend  # noqa: E402
from flower_batch.backend.docker.loopback_hosts import cache_folder  # noqa: E402
from flower_batch.backend.select import REGISTRY_ENV, open_backend  # noqa: E402
from flower_batch.jobsfile import load_jobs_file  # noqa: E402
from flower_batch.layout import Home  # noqa: E402
from flower_batch.running.scheduler import run_jobs  # noqa: E402

# Another test cluster (scripts/cluster/up.sh PREFIX=... ENV_FILE=...): FLOWER_BATCH_CLUSTER_ENV.
ENV_FILE = Path(os.environ.get("FLOWER_BATCH_CLUSTER_ENV") or ROOT / "images" / ".cache" / "cluster.env")
PROJECT = ROOT / "tests" / "batch_fixtures" / "project"


def jobs_toml(n: int, backend: str) -> str:
    return f"""
[batch]
name = "bench-{backend}"

[defaults]
workflow = "flows:solo"
prompt = "Read TASK.md and do what it asks."
timeout = "10m"
memory = "1g"
gateway = {{ mode = "scripted", scenario = "scenarios/quick.toml" }}

[tasks.alpha]
workspace = "tasks/alpha"
check = "grep -qx alpha answer.txt"

[matrix]
repeat = {n}
"""


def instrument(backend: Backend, submitted: dict[str, float], running: dict[str, float]) -> None:
    """Time each job task from `start` to the engine reporting it running (polled through the
    Backend contract every 0.2 s, the same way on both engines)."""
    start = backend.start

    async def timed_start(cid: str) -> None:
        info = await backend.inspect(cid)
        await start(cid)
        if info.labels.get("org.flower-batch.role") != "job":
            return
        submitted[cid] = time.monotonic()
        while True:
            state = (await backend.inspect(cid)).state
            if state in ("running", "exited", "dead"):
                running[cid] = time.monotonic()
                return
            await anyio.sleep(0.2)

    backend.start = timed_start  # type: ignore[method-assign]


def run_matrix(side: str, jobs: int, parallel: int, image_id: str, env: dict[str, str]) -> dict[str, float]:
    kind = "docker" if side == "docker" else "swarm"
    work = Path(tempfile.mkdtemp(prefix=f"fb-bench-{kind}-", dir=env.get("SHARED_ROOT")))
    old = {k: os.environ.get(k) for k in env}
    os.environ.update({k: v for k, v in env.items() if k != "SHARED_ROOT"})
    if kind == "docker":
        os.environ.pop("DOCKER_HOST", None)
    try:
        project = work / "project"
        shutil.copytree(PROJECT, project)
        (project / "jobs.toml").write_text(jobs_toml(jobs, kind))
        jf = load_jobs_file(project / "jobs.toml")
        home = Home(work / "home")
        home.root.mkdir()
        submitted: dict[str, float] = {}
        running: dict[str, float] = {}
        reasons: list[str] = []

        async def go() -> dict[str, str]:
            async with open_backend(
                kind, home.root, registry=os.environ.get(REGISTRY_ENV), cache=cache_folder(os.environ)
            ) as backend:
                if side == "swarm-cold":
                    backend.warm_networks = False  # type: ignore[attr-defined]
                instrument(backend, submitted, running)
                records = await run_jobs(
                    backend,
                    home,
                    jf.name,
                    [(j, None) for j in jf.jobs],
                    image_id=image_id,
                    versions={},
                    parallel=parallel,
                    search=[project],
                )
                for r in records.values():  # why a job did not pass, once per distinct reason
                    if r.status != "passed" and (r.reason or r.status) not in reasons:
                        reasons.append(r.reason or r.status)
                return {k: r.status for k, r in records.items()}

        t0 = time.monotonic()
        statuses = anyio.run(go)
        wall = time.monotonic() - t0
        passed = sum(s == "passed" for s in statuses.values())
        for reason in reasons[:3]:
            print(f"  {side}: a job not passed: {' '.join(reason.split())[:300]}", flush=True)
        latencies = sorted(running[c] - submitted[c] for c in submitted if c in running)
        return {
            "wall_s": wall,
            "passed": passed,
            "jobs": len(statuses),
            # nan when no job task got as far as running (an overloaded swarm: see `passed`)
            "p50_s": statistics.median(latencies) if latencies else float("nan"),
            "p95_s": latencies[max(0, round(0.95 * len(latencies)) - 1)] if latencies else float("nan"),
        }
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(work, ignore_errors=True)


def engine_floor(services: int, parallel: int, image_ref: str, env: dict[str, str]) -> dict[str, float]:
    """Submit -> running of bare services on the manager: what the cluster itself takes."""
    import docker
    from docker.types import RestartPolicy

    client = docker.DockerClient(base_url=env["DOCKER_HOST"], timeout=120)
    latencies: list[float] = []
    t0 = time.monotonic()

    async def one(i: int, limit: anyio.CapacityLimiter) -> None:
        async with limit:

            def create() -> object:
                return client.services.create(
                    image_ref,
                    ["sleep", "5"],
                    name=f"fb-bench-floor-{os.getpid()}-{i}",
                    restart_policy=RestartPolicy(condition="none"),
                    labels={"org.flower-batch.bench": "floor"},
                )

            began = time.monotonic()
            service = await anyio.to_thread.run_sync(create)
            try:
                while time.monotonic() - began < 120:
                    tasks = await anyio.to_thread.run_sync(service.tasks)  # type: ignore[attr-defined]
                    if any(t["Status"]["State"] in ("running", "complete", "failed") for t in tasks):
                        latencies.append(time.monotonic() - began)
                        return
                    await anyio.sleep(0.05)
            finally:
                await anyio.to_thread.run_sync(service.remove)  # type: ignore[attr-defined]

    async def all_of_them() -> None:
        limit = anyio.CapacityLimiter(parallel)
        async with anyio.create_task_group() as tg:
            for i in range(services):
                tg.start_soon(one, i, limit)

    anyio.run(all_of_them)
    latencies.sort()
    return {
        "wall_s": time.monotonic() - t0,
        "passed": len(latencies),
        "jobs": services,
        "p50_s": statistics.median(latencies) if latencies else float("nan"),
        "p95_s": latencies[max(0, round(0.95 * len(latencies)) - 1)] if latencies else float("nan"),
    }


def pushed_reference(image_id: str, env: dict[str, str]) -> str:
    """REGISTRY/flower-batch-runtime@sha256:..., as the swarm backend resolves it for its jobs."""
    old = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = env["DOCKER_HOST"]

    async def resolve() -> str:
        async with open_backend("swarm", Path(tempfile.gettempdir()), registry=env[REGISTRY_ENV]) as backend:
            return await backend.resolve_image(image_id)  # type: ignore[attr-defined, no-any-return]

    try:
        return anyio.run(resolve)
    finally:
        if old is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = old


def cluster_env() -> dict[str, str]:
    if not ENV_FILE.exists():
        sys.exit(
            f"bench/cluster.py: no test cluster ({ENV_FILE} is missing): run make cluster-up cluster-push"
        )
    env = {}
    for line in ENV_FILE.read_text().splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = shlex.split(value)[0] if value else ""
    env["SHARED_ROOT"] = env["FLOWER_BATCH_CLUSTER_SHARED"].split()[0]
    return env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=32)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--image", default="flower-batch-runtime:latest")
    parser.add_argument(
        "--sides", default="docker,swarm-cold,swarm,engine", help="which of the four, in order"
    )
    args = parser.parse_args()
    env = cluster_env()
    from flower_batch.running.image import read_image

    image_id = read_image(args.image, docker_host="unix:///var/run/docker.sock").id
    print(f"{args.jobs} jobs at -j {args.parallel}, image {image_id[:19]}, {os.cpu_count()} cores")
    figures = {}
    for side in args.sides.split(","):
        if side == "engine":  # the pushed image, as the nodes pull it
            ref = pushed_reference(image_id, env)
            f = engine_floor(args.jobs, args.parallel, ref, env)
        else:
            f = run_matrix(side, args.jobs, args.parallel, image_id, env)
        figures[side] = f
        print(
            f"{side:10}  wall {f['wall_s']:7.1f} s  {'ran' if side == 'engine' else 'passed'} "
            f"{f['passed']:.0f}/{f['jobs']:.0f}  "
            f"submit->running p50 {f['p50_s']:.2f} s  p95 {f['p95_s']:.2f} s",
            flush=True,
        )
    for side in ("swarm-cold", "swarm"):
        if side in figures and "docker" in figures:
            print(
                f"wall-time ratio {side}/docker: {figures[side]['wall_s'] / figures['docker']['wall_s']:.2f}"
            )


if __name__ == "__main__":
    main()
