"""`python -m flower_batch.backend.swarm.task_signals CONTROL -- CMD...`: signals for a cluster task.

A Swarm manager can start and remove a task but cannot signal one (there is no `docker kill`
for services). So a cluster task runs its command under this small supervisor, which forwards
every signal number appended as a line to the CONTROL file (on shared storage, written by the
orchestrator's `signal`/`stop`) and every signal it receives itself (Swarm's SIGTERM when the
service is removed) to the command, then exits as a shell does: the command's code, or 128+N
when a signal ended it. Stdlib only: it starts in the time Python starts.

Before the command it writes the build key baked into the image it runs (/opt/flower/build-key)
to CONTROL's folder, so the orchestrator learns which bytes the node actually ran, and refuses
to start the command when that is not the pinned image's key (env FB_IMAGE_KEY): drift.

It also hands the command its secrets as on one machine (backend/secret_env.py):
the engine put each in a file (env NAME_FILE), and the names listed in FB_SECRET_NAMES become env
NAME of the command, so no inspect of the service or its container ever holds a value.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from flower_batch.backend.secret_env import command_env

POLL_S = 0.05


BUILD_KEY_FILE = Path("/opt/flower/build-key")
EXPECTED_KEY_ENV = "FB_IMAGE_KEY"
REPORT = "image"  # in CONTROL's folder: the build key this task's node ran
DRIFT_EXIT = 125


def report_image(control: Path, key_file: Path = BUILD_KEY_FILE) -> str:
    """Write the build key of the image this task runs next to CONTROL; return it ("" if none)."""
    try:
        key = key_file.read_text().strip()
    except OSError:
        key = ""
    (control.parent / REPORT).write_text(key + "\n")
    return key


def supervise(control: Path, command: list[str], environ: dict[str, str]) -> int:
    """`environ`: this process's, read by main() where it starts."""
    key = report_image(control)
    expected = environ.get(EXPECTED_KEY_ENV, "")
    if expected and key != expected:
        print(
            f"flower-batch: this node runs image build {key or 'unknown'}, not the pinned {expected}: "
            "not starting (drift)",
            file=sys.stderr,
        )
        return DRIFT_EXIT
    child = subprocess.Popen(command, env=command_env(environ))
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


def main(argv: list[str], environ: dict[str, str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m flower_batch.backend.swarm.task_signals CONTROL -- CMD...", file=sys.stderr)
        return 2
    return supervise(Path(argv[0]), argv[2:], environ)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], dict(os.environ)))  # read here, where the task's process starts
