"""What the swarm tests add to `make test`: a fresh test cluster brought up from nothing (node
and registry images made with debootstrap, unless --reuse-images) plus every test marked swarm,
against issue 13's budget of 15 minutes. Uses a cluster of its own (prefix fbbench) and takes
it down after, with the image tags it made.

    .venv/bin/python bench/swarm_tests_cost.py [--reuse-images]

Needs root (debootstrap), Docker, and the runtime image buildable (as `make test`).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "fbbench"
BUDGET_MIN = 15.0
DURATION = re.compile(r"\s*([\d.]+)s (setup|call|teardown)\s+(\S+)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reuse-images", action="store_true", help="keep the cached node/registry images")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    env.update(FB_TEST_SWARM_PREFIX=PREFIX, PREFIX=PREFIX)
    tags: list[str] = []
    if not args.reuse_images:  # a fresh machine has neither image: make both, under tags of our own
        tags = [f"flower-batch-bench-node:{os.getpid()}", f"flower-batch-bench-registry:{os.getpid()}"]
        env.update(NODE_IMAGE=tags[0], REGISTRY_IMAGE=tags[1])
    load_before = os.getloadavg()[0]
    t0 = time.monotonic()
    try:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-m", "swarm", "-p", "no:cacheprovider", "--durations=0"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        wall = time.monotonic() - t0
    finally:
        subprocess.run([str(ROOT / "scripts" / "cluster" / "down.sh")], env=env, capture_output=True)
        for tag in tags:
            subprocess.run(["docker", "rmi", tag], env=env, capture_output=True)
    phases = [(float(m[1]), m[2], m[3]) for m in map(DURATION.match, run.stdout.splitlines()) if m]
    bring_up = max((t for t, phase, _ in phases if phase == "setup"), default=0.0)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-500:]
    print(f"pytest -m swarm   {summary}")
    print(
        f"bring-up          {bring_up:6.0f} s  (the slowest setup: the first swarm test's, a cluster from "
        f"{'cached' if args.reuse_images else 'no'} images)"
    )
    print(f"tests             {wall - bring_up:6.0f} s")
    print(
        f"total             {wall:6.0f} s = {wall / 60:.1f} min   budget {BUDGET_MIN:.0f} min: "
        f"{'within' if wall / 60 <= BUDGET_MIN else 'OVER'}"
    )
    print(f"load average      {load_before:.1f} before, {os.getloadavg()[0]:.1f} after (2 shared cores)")
    return 0 if run.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
