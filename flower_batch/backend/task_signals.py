"""`python -m flower_batch.backend.task_signals CONTROL -- CMD...`: signals for a cluster task.

A Swarm manager can start and remove a task but cannot signal one (there is no `docker kill`
for services). So a cluster task runs its command under this small supervisor, which forwards
every signal number appended as a line to the CONTROL file (on shared storage, written by the
orchestrator's `signal`/`stop`) and every signal it receives itself (Swarm's SIGTERM when the
service is removed) to the command, then exits as a shell does: the command's code, or 128+N
when a signal ended it. Stdlib only: it starts in the time Python starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

POLL_S = 0.05


def supervise(control: Path, command: list[str]) -> int:
    child = subprocess.Popen(command)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, lambda n, _f: _send(child, n))
    seen = 0
    while True:
        try:
            code = child.wait(timeout=POLL_S)
            return 128 - code if code < 0 else code
        except subprocess.TimeoutExpired:
            pass
        try:
            lines = control.read_text().split()
        except OSError:
            continue
        for line in lines[seen:]:
            if line.isdigit():
                _send(child, int(line))
        seen = len(lines)
        time.sleep(0)


def _send(child: subprocess.Popen[bytes], number: int) -> None:
    try:
        os.kill(child.pid, number)
    except ProcessLookupError:
        pass


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m flower_batch.backend.task_signals CONTROL -- CMD...", file=sys.stderr)
        return 2
    return supervise(Path(argv[0]), argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
