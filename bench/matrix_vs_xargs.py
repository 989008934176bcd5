"""N one-step jobs at -j P: `flower-batch matrix` vs `xargs -P P docker run` of the same jobs.

Both sides run the same image, the same one-step workflow and the same scripted model; the
baseline is what a user would script by hand (no records, no gateway isolation, no checks, no
resume). Printed, measured in this one run: the wall time of each and their ratio, the
infrastructure errors (records whose failure class is `infrastructure`, and baseline runs that
exited non-zero), where the orchestrator's time went (before the first job started; the jobs'
median duration on each side) and what the orchestrator and the gateway cost in CPU.

With `--rounds R` each side runs the N jobs R times, in the order matrix, raw, raw, matrix, ...
(each side first as often as last), and every figure is over all of them: on a shared machine
the same work's CPU time drifts by a third between minutes, and a single pair of runs
measures that drift as much as the orchestrator. The walls of each round are printed too.

    .venv/bin/python bench/matrix_vs_xargs.py [--jobs 64] [-j 8] [--rounds 2]
    .venv/bin/python bench/matrix_vs_xargs.py --jobs 128 -j 32 --rounds 2
    .venv/bin/python bench/matrix_vs_xargs.py --jobs 512 -j 64 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.pingjob import FLOW, SCENARIO, raw_command  # noqa: E402
from flower.scripted import ScriptedServer  # noqa: E402
from flower_batch.backend.confinement import hand_over, sandbox_user  # noqa: E402
from flower_batch.running.image import build_image  # noqa: E402

# Both sides' jobs wait up to 10 min for the CLI's first answer (the SDK's default is 60 s): at
# -j 64 on two cores, 64 CLIs starting at once take longer than that on either side, and the
# bench measures how fast the jobs get through, not which side's jobs time out first.
INIT_TIMEOUT_MS = 600_000
CPUACCT = Path("/sys/fs/cgroup/cpuacct/docker")  # cgroup v1 with the cgroupfs driver


def jobs_toml(name: str, n: int) -> str:
    return f"""
[batch]
name = "{name}"

[defaults]
workflow = "benchflow:main"
timeout = "15m"
env = {{ CLAUDE_CODE_STREAM_CLOSE_TIMEOUT = "{INIT_TIMEOUT_MS}" }}
gateway = {{ mode = "scripted", scenario = "bench.toml" }}

[tasks.noop]
workspace = "ws"
prompt = "ping"

[matrix]
repeat = {n}
"""


class ContainersCpu:
    """Every container's CPU (ns) while the block runs, read from its cgroup every 0.25 s until
    it goes (the last reading is what it used, give or take its last quarter second): splits a
    side's machine CPU into the containers' own and the rest (engine, shims, FUSE, orchestrator)."""

    every_s = 0.25

    def __init__(self) -> None:
        self.used: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> ContainersCpu:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def ids(self) -> list[str]:
        return [p.name for p in CPUACCT.iterdir() if p.is_dir()]

    def _poll(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                ids = self.ids()
            except OSError:
                return  # not cgroup v1 with cgroupfs: nothing to read
            for cid in ids:
                try:
                    self.used[cid] = int((CPUACCT / cid / "cpuacct.usage").read_text())
                except (OSError, ValueError):
                    pass

    def seconds(self, leaving_out: Collection[str] = ()) -> float | None:
        kept = [ns for cid, ns in self.used.items() if cid not in leaving_out]
        return sum(kept) / 1e9 if kept else None


class GatewayCpu(ContainersCpu):
    """The batch's gateway containers only, asked of the engine every 0.5 s. Over its API, not
    with `docker ps`: a CLI process every 0.5 s cost 2.3 s of machine CPU in a 64-job run,
    charged to the matrix side (the baseline runs no such poll)."""

    every_s = 0.5

    def __init__(self, batch: str) -> None:
        import docker

        super().__init__()
        self.batch = batch
        self._api = docker.APIClient()

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self._api.close()

    def ids(self) -> list[str]:
        labels = ["org.flower-batch.role=gateway", f"org.flower-batch.batch={self.batch}"]
        return [c["Id"] for c in self._api.containers(quiet=True, filters={"label": labels})]


def machine_cpu() -> float | None:
    """CPU seconds the whole machine has used (cgroup v1's root cpuacct; v2's root cpu.stat)."""
    try:
        return int(Path("/sys/fs/cgroup/cpuacct/cpuacct.usage").read_text()) / 1e9
    except (OSError, ValueError):
        pass
    try:
        line = Path("/sys/fs/cgroup/cpu.stat").read_text().splitlines()[0]  # usage_usec N
        return int(line.split()[1]) / 1e6
    except (OSError, ValueError, IndexError):
        return None


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _ts(text: str | None) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


@dataclass
class Totals:
    """One side's figures, summed over its rounds."""

    walls: list[float] = field(default_factory=list)
    machine: float | None = 0.0  # CPU seconds of the whole machine while the side ran
    in_containers: float | None = 0.0  # of it, the jobs' containers (the gateway's left out)
    gateway: float | None = 0.0
    orchestrator: float = 0.0  # the flower-batch process (the matrix side only)
    durations: list[float] = field(default_factory=list)
    failed: int = 0  # raw: runs that exited non-zero or never reported
    done: int = 0  # raw: manifests written; matrix: records
    passed: int = 0
    infra: list[dict[str, object]] = field(default_factory=list)
    first_start: list[float] = field(default_factory=list)
    requests: int = 0

    def add_cpu(self, machine: float | None, containers: float | None, gateway: float | None = 0.0) -> None:
        """A round's CPU; a figure this machine cannot read (None) stays unknown for the side."""
        self.machine = _plus(self.machine, machine)
        self.in_containers = _plus(self.in_containers, containers)
        self.gateway = _plus(self.gateway, gateway)


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def cpu_between(before: float | None, after: float | None) -> float | None:
    return _plus(after, None if before is None else -before)


def matrix_round(tmp: Path, batch: str, args: argparse.Namespace, home: Path, totals: Totals) -> bool:
    """`flower-batch matrix` of the N jobs into a fresh `home`; False when the command failed."""
    (tmp / "jobs.toml").write_text(jobs_toml(batch, args.jobs))
    cmd = [str(ROOT / ".venv" / "bin" / "flower-batch"), "matrix", str(tmp / "jobs.toml")]
    cmd += ["-j", str(args.parallel), "--home", str(home), "--fresh"]
    cpu0, machine0 = children_cpu(), machine_cpu()
    with GatewayCpu(batch) as gw_cpu, ContainersCpu() as containers:
        m0 = time.time()
        done = subprocess.run(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "TERM": "dumb"},
            check=False,
        )
        totals.walls.append(time.time() - m0)
    totals.orchestrator += children_cpu() - cpu0
    if done.returncode not in (0, 1, 3):  # 1: a job did not pass; 3: infrastructure errors
        print(done.stderr[-2000:], file=sys.stderr)
        return False
    totals.add_cpu(
        cpu_between(machine0, machine_cpu()),
        containers.seconds(leaving_out=set(gw_cpu.used)),
        gw_cpu.seconds(),
    )
    records = [json.loads(p.read_text()) for p in (home / batch).glob("*/record.json")]
    totals.done += len(records)
    totals.infra += [r for r in records if r.get("failure_class") == "infrastructure"]
    totals.passed += sum(r.get("status") == "passed" for r in records)
    totals.durations += [float(r["duration_s"]) for r in records if r.get("duration_s") is not None]
    starts = [s for s in (_ts(r.get("started_at")) for r in records) if s is not None]
    if starts:
        totals.first_start.append(min(starts) + 1.0 - m0)  # started_at is to the second: at most this
    totals.requests += sum(sum(1 for _ in p.open()) for p in (home / batch).glob("*/logs/gateway.jsonl"))
    return True


def raw_round(tmp: Path, image_id: str, args: argparse.Namespace, base: Path, totals: Totals) -> None:
    """The baseline: the same jobs by hand with `xargs -P`, model on the host network, as the uid
    flower-batch runs them as (on fuse-overlayfs a non-root uid costs about a second a job: not ours)."""
    for i in range(1, args.jobs + 1):
        shutil.copytree(tmp / "ws", base / f"j{i}" / "workspace")
        (base / f"j{i}" / "runs").mkdir(parents=True)
    hand_over(base)
    with ScriptedServer(tmp / "bench.toml", host="0.0.0.0") as srv:
        # xargs puts each job's number for {} (inside the quoted words too)
        docker_run = shlex.join(
            raw_command(
                image_id,
                f"{base}/j{{}}",
                str(tmp / "flows"),
                srv.port,
                sandbox_user(),
                "benchflow",
                extra_env=[f"CLAUDE_CODE_STREAM_CLOSE_TIMEOUT={INIT_TIMEOUT_MS}"],
            )
        )
        # Each run's own start and end, for the jobs' median duration.
        timed_run = f"s=$(date +%s.%N); {docker_run} >/dev/null 2>&1; rc=$?; echo {{}} $s $(date +%s.%N) $rc"
        seq = "\n".join(str(i) for i in range(1, args.jobs + 1)) + "\n"
        machine0, t0 = machine_cpu(), time.time()
        with ContainersCpu() as containers:
            xargs = subprocess.run(
                ["xargs", "-P", str(args.parallel), "-I{}", "sh", "-c", timed_run],
                input=seq,
                text=True,
                capture_output=True,
                check=False,
            )
        totals.walls.append(time.time() - t0)
        totals.add_cpu(cpu_between(machine0, machine_cpu()), containers.seconds())
    runs = [line.split() for line in xargs.stdout.splitlines() if len(line.split()) == 4]
    totals.failed += sum(r[3] != "0" for r in runs) + (args.jobs - len(runs))
    totals.durations += [float(r[2]) - float(r[1]) for r in runs]
    totals.done += sum((base / f"j{i}" / "runs" / "manifest.json").exists() for i in range(1, args.jobs + 1))


def report(args: argparse.Namespace, image_id: str, m: Totals, r: Totals) -> None:
    n = args.jobs * args.rounds
    rounds = f"{args.rounds} round{'s' if args.rounds > 1 else ''}"
    print(
        f"{args.jobs} one-step jobs at -j {args.parallel}, {rounds} (image {image_id[:19]}, scripted model)"
    )
    print(f"  flower-batch matrix      {sum(m.walls):7.1f} s  ({m.done} records, {m.passed} passed)")
    print(f"  xargs -P docker run      {sum(r.walls):7.1f} s  ({r.done} manifests)")
    print(f"  ratio matrix / raw       {sum(m.walls) / sum(r.walls):7.2f}x")
    if args.rounds > 1:
        pairs = ", ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(m.walls, r.walls, strict=True))
        print(f"    each round, matrix/raw s: {pairs}")
    print(f"  infrastructure errors    {len(m.infra):7d}    (baseline runs failed: {r.failed})")
    for rec in m.infra[:5]:
        print(f"    {rec.get('job_id')}: {str(rec.get('reason'))[:160]}")
    if m.first_start:
        print(
            f"  first job started within {max(m.first_start):7.1f} s  (image check, pre-flight, gateway; "
            "the records' times are to the second)"
        )
    if m.durations and r.durations:
        print(
            f"  job duration median      {statistics.median(m.durations):7.2f} s matrix, "
            f"{statistics.median(r.durations):.2f} s raw"
        )
    print(
        f"  orchestrator CPU         {m.orchestrator:7.1f} s  ({m.orchestrator / max(1, m.done) * 1000:.0f} ms a job)"
    )
    if m.gateway is not None and m.requests:
        print(
            f"  gateway CPU              {m.gateway:7.1f} s  ({m.requests} requests, "
            f"{m.gateway / m.requests * 1000:.1f} ms a request)"
        )
    if m.machine is None or r.machine is None:
        return
    # everything on the machine: containers, engine, shims, FUSE, the orchestrator
    ours, theirs = m.machine / n, r.machine / n
    print(f"  machine CPU a job        {ours:7.2f} s matrix, {theirs:.2f} s raw ({ours - theirs:+.2f} s)")
    if m.in_containers is None or r.in_containers is None:
        return
    # what is left of the machine's CPU: the engine, shims, FUSE, the orchestrator
    out_jobs = ours - m.in_containers / n - (m.gateway or 0.0) / n
    out_raw = theirs - r.in_containers / n
    print(
        f"    in the jobs' containers {m.in_containers / n:6.2f} s matrix, "
        f"{r.in_containers / n:.2f} s raw ({(m.in_containers - r.in_containers) / n:+.2f} s)"
    )
    print(
        f"    outside them            {out_jobs:6.2f} s matrix, {out_raw:.2f} s raw "
        f"({out_jobs - out_raw:+.2f} s; the gateway left out)"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=64, help="how many one-step jobs (default 64)")
    parser.add_argument("-j", "--parallel", type=int, default=8, help="jobs at once on each side (default 8)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side, alternating (default 2)")
    args = parser.parse_args()
    if min(args.jobs, args.parallel, args.rounds) < 1:
        parser.error("--jobs, -j and --rounds take 1 or more")
    image = build_image(log=lambda line: None)
    tmp = Path(tempfile.mkdtemp(prefix="fb-bench-"))
    batch = f"bench{args.jobs}j{args.parallel}-{os.getpid()}"
    matrix, raw = Totals(), Totals()
    try:
        (tmp / "ws").mkdir()
        (tmp / "ws" / "README").write_text("bench\n")
        (tmp / "benchflow.py").write_text(FLOW)
        (tmp / "bench.toml").write_text(SCENARIO)
        (tmp / "flows").mkdir()
        shutil.copyfile(tmp / "benchflow.py", tmp / "flows" / "benchflow.py")
        for n in range(args.rounds):
            order = ("matrix", "raw") if n % 2 == 0 else ("raw", "matrix")
            for side in order:
                if side == "raw":
                    raw_round(tmp, image.id, args, tmp / f"raw{n}", raw)
                elif not matrix_round(tmp, f"{batch}r{n}", args, tmp / f"home{n}", matrix):
                    return 2
        report(args, image.id, matrix, raw)
        return 0 if not matrix.infra and not raw.failed else 3
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
