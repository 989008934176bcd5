"""N one-step jobs at -j P: `flower-batch matrix` vs `xargs -P P docker run` of the same jobs.

Both sides run the same image, the same one-step workflow and the same scripted model; the
baseline is what a user would script by hand (no records, no gateway isolation, no checks, no
resume). Printed, measured in this one run: the wall time of each and their ratio, the
infrastructure errors (records whose failure class is `infrastructure`, and baseline runs that
exited non-zero), where the orchestrator's time went (before the first job started; the jobs'
median duration on each side) and what the orchestrator and the gateway cost in CPU.

    .venv/bin/python bench/matrix_vs_xargs.py [--jobs 64] [-j 8]
    .venv/bin/python bench/matrix_vs_xargs.py --jobs 128 -j 32
    .venv/bin/python bench/matrix_vs_xargs.py --jobs 512 -j 64
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=64, help="how many one-step jobs (default 64)")
    parser.add_argument("-j", "--parallel", type=int, default=8, help="jobs at once on each side (default 8)")
    args = parser.parse_args()
    image = build_image(log=lambda line: None)
    tmp = Path(tempfile.mkdtemp(prefix="fb-bench-"))
    batch = f"bench{args.jobs}j{args.parallel}-{os.getpid()}"
    try:
        (tmp / "ws").mkdir()
        (tmp / "ws" / "README").write_text("bench\n")
        (tmp / "benchflow.py").write_text(FLOW)
        (tmp / "bench.toml").write_text(SCENARIO)
        (tmp / "jobs.toml").write_text(jobs_toml(batch, args.jobs))

        fb = [str(ROOT / ".venv" / "bin" / "flower-batch")]
        cmd = fb + [
            "matrix",
            str(tmp / "jobs.toml"),
            "-j",
            str(args.parallel),
            "--home",
            str(tmp / "home"),
            "--fresh",
        ]
        cpu0, machine0 = children_cpu(), machine_cpu()
        with GatewayCpu(batch) as gw_cpu, ContainersCpu() as matrix_containers:
            m0 = time.time()
            done = subprocess.run(
                cmd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "TERM": "dumb"},
                check=False,
            )
            orchestrated = time.time() - m0
        orch_cpu = children_cpu() - cpu0
        machine1 = machine_cpu()
        if done.returncode not in (0, 1, 3):  # 1: a job did not pass; 3: infrastructure errors
            print(done.stderr[-2000:], file=sys.stderr)
            return 2

        # The baseline: the same jobs by hand, model on the host network, as the uid flower-batch
        # runs them as (on fuse-overlayfs a non-root uid costs about a second a job: not ours).
        base = tmp / "raw"
        for i in range(1, args.jobs + 1):
            shutil.copytree(tmp / "ws", base / f"j{i}" / "workspace")
            (base / f"j{i}" / "runs").mkdir(parents=True)
        hand_over(base)
        flows = tmp / "flows"
        flows.mkdir()
        shutil.copyfile(tmp / "benchflow.py", flows / "benchflow.py")
        with ScriptedServer(tmp / "bench.toml", host="0.0.0.0") as srv:
            # xargs puts each job's number for {} (inside the quoted words too)
            docker_run = shlex.join(
                raw_command(
                    image.id,
                    f"{base}/j{{}}",
                    str(flows),
                    srv.port,
                    sandbox_user(),
                    "benchflow",
                    extra_env=[f"CLAUDE_CODE_STREAM_CLOSE_TIMEOUT={INIT_TIMEOUT_MS}"],
                )
            )
            # Each run's own start and end, for the jobs' median duration.
            timed_run = (
                f"s=$(date +%s.%N); {docker_run} >/dev/null 2>&1; rc=$?; echo {{}} $s $(date +%s.%N) $rc"
            )
            seq = "\n".join(str(i) for i in range(1, args.jobs + 1)) + "\n"
            machine2, t0 = machine_cpu(), time.time()
            with ContainersCpu() as raw_containers:
                xargs = subprocess.run(
                    ["xargs", "-P", str(args.parallel), "-I{}", "sh", "-c", timed_run],
                    input=seq,
                    text=True,
                    capture_output=True,
                    check=False,
                )
            raw = time.time() - t0
            machine3 = machine_cpu()
        runs = [line.split() for line in xargs.stdout.splitlines() if len(line.split()) == 4]
        raw_failed = sum(r[3] != "0" for r in runs) + (args.jobs - len(runs))
        raw_durations = [float(r[2]) - float(r[1]) for r in runs]
        ok_raw = sum((base / f"j{i}" / "runs" / "manifest.json").exists() for i in range(1, args.jobs + 1))

        records = [json.loads(p.read_text()) for p in (tmp / "home" / batch).glob("*/record.json")]
        infra = [r for r in records if r.get("failure_class") == "infrastructure"]
        passed = sum(r.get("status") == "passed" for r in records)
        durations = [float(r["duration_s"]) for r in records if r.get("duration_s") is not None]
        starts = [s for s in (_ts(r.get("started_at")) for r in records) if s is not None]
        requests = sum(sum(1 for _ in p.open()) for p in (tmp / "home" / batch).glob("*/logs/gateway.jsonl"))
        print(f"{args.jobs} one-step jobs at -j {args.parallel} (image {image.id[:19]}, scripted model)")
        print(f"  flower-batch matrix      {orchestrated:7.1f} s  ({len(records)} records, {passed} passed)")
        print(f"  xargs -P docker run      {raw:7.1f} s  ({ok_raw} manifests)")
        print(f"  ratio matrix / raw       {orchestrated / raw:7.2f}x")
        print(f"  infrastructure errors    {len(infra):7d}    (baseline runs failed: {raw_failed})")
        for r in infra[:5]:
            print(f"    {r.get('job_id')}: {str(r.get('reason'))[:160]}")
        if starts:
            print(f"  first job started after  {min(starts) - m0:7.1f} s  (image check, pre-flight, gateway)")
        if durations and raw_durations:
            print(
                f"  job duration median      {statistics.median(durations):7.2f} s matrix, "
                f"{statistics.median(raw_durations):.2f} s raw"
            )
        print(
            f"  orchestrator CPU         {orch_cpu:7.1f} s  ({orch_cpu / max(1, len(records)) * 1000:.0f} ms a job)"
        )
        if (gw_seconds := gw_cpu.seconds()) is not None and requests:
            print(
                f"  gateway CPU              {gw_seconds:7.1f} s  ({requests} requests, "
                f"{gw_seconds / requests * 1000:.1f} ms a request)"
            )
        if None not in (machine0, machine1, machine2, machine3):
            # everything on the machine: containers, engine, shims, FUSE, the orchestrator
            ours = (machine1 - machine0) / args.jobs  # type: ignore[operator]
            theirs = (machine3 - machine2) / args.jobs  # type: ignore[operator]
            print(
                f"  machine CPU a job        {ours:7.2f} s matrix, {theirs:.2f} s raw ({ours - theirs:+.2f} s)"
            )
            in_jobs = matrix_containers.seconds(leaving_out=set(gw_cpu.used))
            in_raw = raw_containers.seconds()
            if in_jobs is not None and in_raw is not None:
                # what is left of the machine's CPU: the engine, shims, FUSE, the orchestrator
                out_jobs = ours - in_jobs / args.jobs - (gw_cpu.seconds() or 0.0) / args.jobs
                out_raw = theirs - in_raw / args.jobs
                print(
                    f"    in the jobs' containers {in_jobs / args.jobs:6.2f} s matrix, "
                    f"{in_raw / args.jobs:.2f} s raw ({(in_jobs - in_raw) / args.jobs:+.2f} s)"
                )
                print(
                    f"    outside them            {out_jobs:6.2f} s matrix, {out_raw:.2f} s raw "
                    f"({out_jobs - out_raw:+.2f} s; the gateway left out)"
                )
        return 0 if not infra and not raw_failed else 3
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
