"""How long a 500-task Harbor task set takes to plan (issue 35; goal: under 5 s).

A generated set (tests/batch_fixtures/harbor_set.py: 500 task folders, each a two-line Dockerfile
FROM one shared base) is planned with `flower-batch matrix jobs.toml --dry-run`, which reads and
hashes every task folder and lists every job; nothing is built (builds are resolved only when
jobs run). Printed: the wall time of the whole command (Python's start and the engine's
pre-flight included), the jobs it listed, and the time of the jobs file's load alone. Nothing is
asserted.

    .venv/bin/python bench/harbor_plan.py [--tasks 500] [--repeat 3]
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
