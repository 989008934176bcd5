"""The swarm test cluster brought up in the background (tests/batch_fixtures/swarm.py
start_in_background), so that the swarm tests find it up instead of waiting for it.

    python -m tests.batch_fixtures.swarm_background start [--cluster-only]
        starts the child below and returns at once (`make test`, before the image build)
    python -m tests.batch_fixtures.swarm_background FD [--cluster-only]
        the child: holds the bring-up lock inherited as file descriptor FD until it is done

The child's output goes to /tmp/flower-batch-cluster-<prefix>.background.log; when it fails, the
first swarm test brings the cluster up itself and fails with the reason."""

from __future__ import annotations

import sys
import time

from tests.batch_fixtures.swarm import BACKGROUND_LOG, PREFIX, bring_up_holding, start_in_background


def main(argv: list[str]) -> int:
    cluster_only = "--cluster-only" in argv
    if argv[0] == "start":
        started = start_in_background(cluster_only)
        print(
            f"test cluster {PREFIX}: "
            + (f"coming up in the background ({BACKGROUND_LOG})" if started else "already being brought up")
        )
        return 0
    began = time.monotonic()
    print(f"{bring_up_holding(int(argv[0]), cluster_only)} ({time.monotonic() - began:.0f}s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
