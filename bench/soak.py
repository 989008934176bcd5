"""The soak bench of issue 10, both halves in one run.

  5a  bench/soak_gateway.py  the gateway alone (scripted and proxy mode): memory at checkpoints,
                             bytes logged per request, latency it adds (p50/p99 at ~1 MB bodies);
  5b  bench/soak_e2e.py      end to end in a container with the real CLI: a --persistent job of
                             300+ model turns with tool calls and a handoff, woken twice;
  5c                         `docker kill` of the gateway mid-job, N tries: recovered k/N, metered
                             cost equal to the usage the scripted model sent, nothing counted twice.

Each half prints its figures next to its targets (PASS/FAIL); this exits non-zero when either
missed one.

    .venv/bin/python bench/soak.py            # full size (tens of minutes on 2 cores)
    .venv/bin/python bench/soak.py --quick    # small sizes
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the two halves live beside this file

import soak_e2e  # noqa: E402
import soak_gateway  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for both halves")
    parser.add_argument("--only", choices=("gateway", "e2e"), help="run one half")
    args = parser.parse_args(argv)
    flags = ["--quick"] if args.quick else []
    results = {}
    if args.only in (None, "gateway"):
        print("== 5a: the gateway alone", flush=True)
        results["gateway"] = soak_gateway.main(flags)
    if args.only in (None, "e2e"):
        print("== 5b/5c: end to end in a container, the gateway killed mid-job", flush=True)
        results["e2e"] = soak_e2e.main(flags)
    print("soak: " + ", ".join(f"{k} {'PASS' if rc == 0 else 'FAIL'}" for k, rc in results.items()))
    return 0 if all(rc == 0 for rc in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
