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
reported running, then removed. No flower-batch code runs on that side. A fifth, `engine-net`,
is the same with each service on an internal overlay network kept up on every node by a global
service (what the jobs have): the floor of a task that joins a network.

Every side is polled every POLL_S. On the swarm sides each task's states (pending, assigned,
preparing, starting, running) are timed from submit where seen, median per state: the table
that says which phase a gap between a side and its floor is in.

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
from flower_batch.jobmodel.image import PinnedImage  # noqa: E402
from flower_batch.jobsfile import load_jobs_file  # noqa: E402
from flower_batch.layout import Home  # noqa: E402
from flower_batch.running.plan import BatchPlan  # noqa: E402
from flower_batch.running.scheduler import run_jobs  # noqa: E402

# Another test cluster (scripts/cluster/up.sh PREFIX=... ENV_FILE=...): FLOWER_BATCH_CLUSTER_ENV.
ENV_FILE = Path(os.environ.get("FLOWER_BATCH_CLUSTER_ENV") or ROOT / "images" / ".cache" / "cluster.env")
PROJECT = ROOT / "tests" / "batch_fixtures" / "project"
POLL_S = 0.05  # every side alike: the sides differ in what is timed, never in how often
PHASES = ("pending", "assigned", "accepted", "preparing", "ready", "starting", "running")
ENDED = ("running", "complete", "failed", "rejected", "shutdown", "orphaned", "remove")


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


def newest_state(api: object, service_id: str) -> str | None:
    tasks = api.tasks(filters={"service": service_id})  # type: ignore[attr-defined]
    if not tasks:
        return None
    return str(max(tasks, key=lambda t: t["CreatedAt"])["Status"]["State"])


async def follow_task(api: object, service_id: str, began: float, phases: dict[str, float]) -> bool:
    """Seconds from `began` to the first sight of each state of the service's task, until it
    runs (or ends); False when it did not get there in 120 s."""
    while time.monotonic() - began < 120:
        state = await anyio.to_thread.run_sync(newest_state, api, service_id)
        if state is not None:
            phases.setdefault(state, time.monotonic() - began)
            if state in ENDED:
                phases.setdefault("running", phases[state])
                return True
        await anyio.sleep(POLL_S)
    return False


def instrument(
    backend: Backend,
    submitted: dict[str, float],
    running: dict[str, float],
    timelines: list[dict[str, float]],
    manager_address: str | None,
) -> None:
    """Time each job task from `start` to the engine reporting it running, polled every POLL_S:
    through the Backend contract on one machine, and on a swarm the task's own states, read
    from its manager (`manager_address`) as the floor reads them."""
    start = backend.start
    manager = None
    if manager_address:
        import docker

        manager = docker.APIClient(base_url=manager_address, timeout=120)

    async def timed_start(cid: str) -> None:
        info = await backend.inspect(cid)
        await start(cid)
        if info.labels.get("org.flower-batch.role") != "job":
            return
        submitted[cid] = time.monotonic()
        if manager is not None:
            phases: dict[str, float] = {}
            if await follow_task(manager, cid, submitted[cid], phases):
                running[cid] = submitted[cid] + phases["running"]
                timelines.append(phases)
            return
        while True:
            state = (await backend.inspect(cid)).state
            if state in ("running", "exited", "dead"):
                running[cid] = time.monotonic()
                return
            await anyio.sleep(POLL_S)

    backend.start = timed_start  # type: ignore[method-assign, assignment]


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
        timelines: list[dict[str, float]] = []
        reasons: list[str] = []

        async def go() -> dict[str, str]:
            async with open_backend(
                kind, home.root, registry=os.environ.get(REGISTRY_ENV), cache=cache_folder(os.environ)
            ) as backend:
                if side == "swarm-cold":
                    backend.warm_networks = False  # type: ignore[attr-defined]
                instrument(
                    backend, submitted, running, timelines, env["DOCKER_HOST"] if kind == "swarm" else None
                )
                records = await run_jobs(
                    backend,
                    BatchPlan(
                        home,
                        jf.name,
                        [(j, None) for j in jf.jobs],
                        PinnedImage(image_id, {}),
                        parallel=parallel,
                        search=[project],
                    ),
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
        latencies = [running[c] - submitted[c] for c in submitted if c in running]
        return figures(wall, passed, len(statuses), latencies, timelines)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(work, ignore_errors=True)


def figures(
    wall: float, passed: int, jobs: int, latencies: list[float], timelines: list[dict[str, float]]
) -> dict[str, float]:
    latencies = sorted(latencies)
    found = {  # nan when no task got as far as running (an overloaded swarm: see `passed`)
        "wall_s": wall,
        "passed": passed,
        "jobs": jobs,
        "p50_s": statistics.median(latencies) if latencies else float("nan"),
        "p95_s": latencies[max(0, round(0.95 * len(latencies)) - 1)] if latencies else float("nan"),
    }
    for phase in PHASES:  # when each state was first seen, median over the tasks where it was
        seen = [t[phase] for t in timelines if phase in t]
        if seen:
            found[f"phase:{phase}"] = statistics.median(seen)
    return found


def remove_floor_network(warm: object | None, net: object | None) -> None:
    """The engine-net side's warm service, then its network once the warm tasks have left it."""
    import docker

    if warm is not None:
        warm.remove()  # type: ignore[attr-defined]
    if net is None:
        return
    until = time.monotonic() + 60
    while True:
        try:
            net.remove()  # type: ignore[attr-defined]
            return
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            if time.monotonic() > until:
                print(f"bench/cluster.py: the floor's network was left: {exc}", file=sys.stderr)
                return
            time.sleep(0.5)


def engine_floor(
    services: int, parallel: int, image_ref: str, env: dict[str, str], network: bool = False, spin: float = 0
) -> dict[str, float]:
    """Submit -> running of bare services on the manager: what the cluster itself takes; with
    `network`, each on an internal overlay kept up on every node (as the jobs' is); with `spin`,
    each burns a core that many seconds once running, as a job's start does (python, the CLI)."""
    import docker
    from docker.types import EndpointSpec, NetworkAttachmentConfig, RestartPolicy, ServiceMode

    client = docker.DockerClient(base_url=env["DOCKER_HOST"], timeout=120)
    tag = f"fb-bench-floor-{os.getpid()}"
    labels = {"org.flower-batch.bench": "floor"}
    net = warm = None
    if network:
        net = client.networks.create(tag, driver="overlay", internal=True, attachable=True, labels=labels)
        warm = client.services.create(
            image_ref,
            ["sleep", "infinity"],
            name=f"{tag}-warm",
            init=True,  # a bare PID 1 ignores SIGTERM: its removal would wait out the grace period
            stop_grace_period=1_000_000_000,
            mode=ServiceMode("global"),
            networks=[NetworkAttachmentConfig(net.id)],
            endpoint_spec=EndpointSpec(mode="dnsrr"),
            labels=labels,
        )
        nodes, until = len(client.nodes.list()), time.monotonic() + 120
        while sum(t["Status"]["State"] == "running" for t in warm.tasks()) < nodes:
            if time.monotonic() > until:  # a node down or without the image: the floor would not be one
                remove_floor_network(warm, net)
                sys.exit(f"bench/cluster.py: the warm service did not run on all {nodes} nodes in 120 s")
            time.sleep(POLL_S)
    latencies: list[float] = []
    timelines: list[dict[str, float]] = []
    t0 = time.monotonic()

    async def one(i: int, limit: anyio.CapacityLimiter) -> None:
        async with limit:

            def create() -> object:
                busy = f"import time\nt = time.process_time()\nwhile time.process_time() - t < {spin}: pass"
                return client.services.create(
                    image_ref,
                    ["python", "-c", busy] if spin else ["sleep", "5"],
                    name=f"{tag}-{i}",
                    restart_policy=RestartPolicy(condition="none"),
                    networks=[NetworkAttachmentConfig(net.id)] if net is not None else None,
                    endpoint_spec=EndpointSpec(mode="dnsrr"),
                    labels=labels,
                )

            began = time.monotonic()
            service = await anyio.to_thread.run_sync(create)
            try:
                phases: dict[str, float] = {}
                if await follow_task(client.api, service.id, began, phases):  # type: ignore[attr-defined]
                    latencies.append(phases["running"])
                    timelines.append(phases)
                while spin and time.monotonic() - began < 120:  # its slot is held until it ends, as a job's
                    state = await anyio.to_thread.run_sync(newest_state, client.api, service.id)  # type: ignore[attr-defined]
                    if state not in ("running", "starting", None):
                        break
                    await anyio.sleep(POLL_S)
            finally:
                await anyio.to_thread.run_sync(service.remove)  # type: ignore[attr-defined]

    async def all_of_them() -> None:
        limit = anyio.CapacityLimiter(parallel)
        async with anyio.create_task_group() as tg:
            for i in range(services):
                tg.start_soon(one, i, limit)

    try:
        anyio.run(all_of_them)
    finally:
        remove_floor_network(warm, net)
    return figures(time.monotonic() - t0, len(latencies), services, latencies, timelines)


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
        "--sides", default="docker,swarm-cold,swarm,engine,engine-net", help="which of the five, in order"
    )
    parser.add_argument(
        "--floor-spin",
        type=float,
        default=0.0,
        help="CPU seconds each floor task burns once running (a job's start: `flower-batch run` shows its CPU)",
    )
    args = parser.parse_args()
    env = cluster_env()
    from flower_batch.running.image import read_image

    image_id = read_image(args.image, docker_host="unix:///var/run/docker.sock").id
    print(f"{args.jobs} jobs at -j {args.parallel}, image {image_id[:19]}, {os.cpu_count()} cores")
    figures = {}
    for side in args.sides.split(","):
        if side.startswith("engine"):  # the pushed image, as the nodes pull it
            ref = pushed_reference(image_id, env)
            f = engine_floor(
                args.jobs, args.parallel, ref, env, network=side == "engine-net", spin=args.floor_spin
            )
        else:
            f = run_matrix(side, args.jobs, args.parallel, image_id, env)
        figures[side] = f
        print(
            f"{side:10}  wall {f['wall_s']:7.1f} s  {'ran' if side.startswith('engine') else 'passed'} "
            f"{f['passed']:.0f}/{f['jobs']:.0f}  "
            f"submit->running p50 {f['p50_s']:.2f} s  p95 {f['p95_s']:.2f} s",
            flush=True,
        )
    phased = {side: f for side, f in figures.items() if any(k.startswith("phase:") for k in f)}
    if phased:
        print("submit -> first seen in each state, median s:")
        print(f"{'':10}  " + " ".join(f"{p:>9}" for p in PHASES))
        for side, f in phased.items():
            cells = (f"{f[f'phase:{p}']:9.2f}" if f"phase:{p}" in f else f"{'-':>9}" for p in PHASES)
            print(f"{side:10}  " + " ".join(cells))
    for side in ("swarm-cold", "swarm"):
        if side in figures and "docker" in figures:
            print(
                f"wall-time ratio {side}/docker: {figures[side]['wall_s'] / figures['docker']['wall_s']:.2f}"
            )


if __name__ == "__main__":
    main()
