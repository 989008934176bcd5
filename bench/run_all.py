"""Every benchmark of the project, one after another (`make bench`).

  overhead.py         per-job overhead of `flower-batch run` vs raw `docker run` (issue 5)
  matrix_vs_xargs.py  a one-step matrix at -j N vs `xargs -P N docker run` (issue 6)
  viewer.py           `flower-batch view` and report.html on a 5,000-job batch (issue 14)
  soak_gateway.py     the gateway alone under long and parallel conversations (issue 10)
  gateway_cpu.py      the gateway's CPU per request at 8, 64 and 256 jobs at once (issue 22)

Each prints its own figures, measured in that one run; nothing is asserted. `--quick` uses
fewer repeats and a smaller matrix (a 2-core laptop: about 2 minutes instead of 6+).

    .venv/bin/python bench/run_all.py [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, a 16-job matrix at -j 4")
    args = parser.parse_args()
    benches = [
        ["overhead.py", "--repeat", "2" if args.quick else "5"],
        [
            "matrix_vs_xargs.py",
            "--jobs",
            "16" if args.quick else "64",
            "--parallel",
            "4" if args.quick else "8",
        ],
        ["viewer.py", *(["--quick"] if args.quick else [])],
        ["soak_gateway.py", *(["--quick"] if args.quick else [])],
        ["gateway_cpu.py", *(["--per-job", "4"] if args.quick else [])],
    ]
    failed = []
    for script, *flags in benches:
        print(f"== {script} {' '.join(flags)}", flush=True)
        t0 = time.monotonic()
        code = subprocess.call([sys.executable, str(HERE / script), *flags])
        print(f"   ({time.monotonic() - t0:.0f} s{'' if code == 0 else f', exit {code}'})\n", flush=True)
        if code:
            failed.append(script)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
