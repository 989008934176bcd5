"""How long a 500-task Harbor task set takes to plan (issue 35; goal: under 5 s).

A generated set (tests/batch_fixtures/harbor_set.py: 500 task folders, each a two-line Dockerfile
FROM one shared base) is planned with `flower-batch matrix jobs.toml --dry-run`, which reads and
hashes every task folder and lists every job; nothing is built (builds are resolved only when
jobs run). Printed: the wall time of the whole command (Python's start and the engine's
pre-flight included), the jobs it listed, and the time of the jobs file's load alone. With
`--run 40`, a slice of that many tasks (`-i` globs) then runs at `-j 8` with the scripted model:
printed, its wall time and how many images were built (each task's once). Nothing is asserted.

    .venv/bin/python bench/harbor_plan.py [--tasks 500] [--repeat 3] [--run 40 [-j 8]]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flower_batch.jobsfile import load_jobs_file  # noqa: E402
from tests.batch_fixtures.harbor_set import write_taskset  # noqa: E402

FB = ROOT / ".venv" / "bin" / "flower-batch"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--run", type=int, default=0, help="then run a slice of this many tasks")
    parser.add_argument("-j", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fb-harbor-plan-") as tmp:
        root = Path(tmp)
        jobs = write_taskset(root, args.tasks)
        home = root / "home"
        walls, loads, listed = [], [], 0
        for _ in range(args.repeat):
            started = time.perf_counter()
            done = subprocess.run(
                [str(FB), "matrix", str(jobs), "--dry-run", "--home", str(home)],
                capture_output=True,
                text=True,
            )
            walls.append(time.perf_counter() - started)
            if done.returncode != 0:
                print(done.stderr[-2000:], file=sys.stderr)
                return 1
            listed = sum(1 for line in done.stdout.splitlines() if line.startswith("run "))
            started = time.perf_counter()
            load_jobs_file(jobs, max_jobs=None)
            loads.append(time.perf_counter() - started)
        print(f"harbor task set of {args.tasks} tasks, {args.repeat} runs")
        print(
            f"  matrix --dry-run: median {statistics.median(walls):.2f} s (max {max(walls):.2f} s), {listed} jobs listed"
        )
        print(f"  load_jobs_file alone: median {statistics.median(loads):.2f} s")
        if args.run:
            _run_slice(jobs, home, args.run, args.j)
    return 0


def _run_slice(jobs: Path, home: Path, count: int, parallel: int) -> None:
    """`count` tasks (task-0001 ...) run at `-j parallel`; the builds counted from the log."""
    globs = [arg for n in range(1, count + 1) for arg in ("-i", f"task-{n:04d}")]
    started = time.perf_counter()
    done = subprocess.run(
        [str(FB), "matrix", str(jobs), "-j", str(parallel), "--home", str(home), *globs],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    builds = done.stderr.count("building the image of task")
    summary = next((line for line in (done.stdout + done.stderr).splitlines() if " passed (" in line), "")
    print(
        f"  a {count}-task slice at -j {parallel}: {wall:.1f} s, exit {done.returncode}, {builds} images built"
    )
    print(f"    {summary.strip()}")
    # What this run built (and kept for wake), removed: only this batch's, never another's. Twice:
    # a task image with a job's state image committed from it goes only once that one is gone.
    for _ in range(2):
        command = [str(FB), "gc", "--images", "--batch", "harbor-set", "--home", str(home)]
        subprocess.run(command, capture_output=True, check=False)


if __name__ == "__main__":
    sys.exit(main())
