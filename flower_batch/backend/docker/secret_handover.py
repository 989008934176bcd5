"""Secrets on the local engine, which has no secret store, without `docker inspect` showing them
and without a byte on the host's disk:

* the container gets a tmpfs at /run/secrets (mode 0700, its own uid's) and env NAME_FILE
  pointing into it: paths, never values;
* its command starts under a few lines of `sh` (WAIT) that wait for the hand-over, read the
  names FB_SECRET_NAMES lists into env NAME, and exec the command (secret_env.py);
* right after every start the orchestrator writes each value into /run/secrets/NAME (umask 377:
  mode 0400) with `docker exec`, the value on the exec's stdin; the last value's exec then marks
  the hand-over done (one exec per secret: an exec costs the engine about 0.1-0.3 s).

Why `docker exec` and stdin: a container's env, command and labels are its configuration, which
inspect shows; a file put with `docker cp` (put_archive) lands in the container's layer on the
host's disk (never in a tmpfs); a bind-mounted file is on the host. An exec's stdin is a stream
from the orchestrator's memory into the container's memory, kept nowhere, and an exec's inspect
shows its command (here a path), not its input. A tmpfs lives for one start of the container,
so every start (a restarted gateway's too) is handed over again.

Only `sh`, `cat` and `sleep` are needed in the image: no Python start-up before the command.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from flower_batch.backend.base import ContainerSpec
from flower_batch.backend.secret_env import SECRET_NAMES_ENV, SECRETS_DIR
from flower_batch.errors import BackendError, one_line

TMPFS = "rw,nosuid,nodev,noexec,size=64k,mode=0700"
DELIVERED = f"{SECRETS_DIR}/.delivered"  # written last: the files before it are whole
WAIT_S = 120  # longer than the gateway supervisor's longest backoff (10 s)
POLL_S = 0.02
WAIT = (
    f'i=0; while [ ! -e {DELIVERED} ]; do i=$((i+1)); if [ "$i" -gt {int(WAIT_S / POLL_S)} ]; then '
    f'echo "flower-batch: no secrets were handed to {SECRETS_DIR} within {WAIT_S}s" >&2; exit 125; fi; '
    f"sleep {POLL_S}; done; "
    f'IFS=,; for n in ${{{SECRET_NAMES_ENV}:-}}; do export "$n=$(cat "{SECRETS_DIR}/$n")"; done; '
    f'unset IFS {SECRET_NAMES_ENV}; exec "$@"'
)
# One value from stdin into $1, mode 0400; nothing again once handed over (a start of a
# container that was running already). RECEIVE_LAST also marks the hand-over done, once its
# file is whole.
RECEIVE = f'[ -e {DELIVERED} ] && exit 0; umask 377 && cat > "$1"'
RECEIVE_LAST = f"{RECEIVE} && : > {DELIVERED}"
EXEC_TIMEOUT_S = 60.0
MAX_OUTPUT = 16 * 1024


def receiving(spec: ContainerSpec) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """The command, env and tmpfs mounts of a container that gets `spec.secrets` (not empty) by
    hand-over: the values are in none of them."""
    uid, _, gid = spec.user.partition(":")
    env = {**spec.env, **{f"{name}_FILE": f"{SECRETS_DIR}/{name}" for name in spec.secrets}}
    if spec.secrets_as_env:
        env[SECRET_NAMES_ENV] = ",".join(spec.secrets)
    tmpfs = {**spec.confinement.tmpfs, SECRETS_DIR: f"{TMPFS},uid={uid},gid={gid or uid}"}
    return ["sh", "-c", WAIT, "flower-batch-secrets", *spec.command], env, tmpfs


def hand_over(api: Any, container_id: str, secrets: dict[str, str]) -> None:
    """Write `secrets` (at least one) into the running container's tmpfs, then mark them handed
    over. Blocking (the docker SDK); raises BackendError."""
    items = list(secrets.items())
    for i, (name, value) in enumerate(items):
        script = RECEIVE_LAST if i == len(items) - 1 else RECEIVE
        _exec(api, container_id, ["sh", "-c", script, "receive", f"{SECRETS_DIR}/{name}"], value.encode())


def _exec(api: Any, container_id: str, command: list[str], stdin: bytes) -> None:
    exec_id = api.exec_create(container_id, command, stdin=True)["Id"]
    stream = api.exec_start(exec_id, socket=True)
    raw = getattr(stream, "_sock", stream)  # the connection under docker-py's SocketIO wrapper
    output = bytearray()
    try:
        raw.settimeout(EXEC_TIMEOUT_S)
        if stdin:
            raw.sendall(stdin)
        raw.shutdown(socket.SHUT_WR)  # end of the value: `cat` ends
        while len(output) < MAX_OUTPUT:
            chunk = raw.recv(4096)
            if not chunk:
                break
            output += chunk
    finally:
        stream.close()
    code = _exit_code(api, exec_id)
    if code != 0:
        said = "".join(c for c in output.decode("utf-8", "replace") if c.isprintable()).strip()
        raise BackendError(
            f"container {container_id[:12]}: could not hand it its secrets (exit {code}): "
            f"{one_line(said[-300:]) or 'no output'}"
        )


def _exit_code(api: Any, exec_id: str) -> int | None:
    deadline = time.monotonic() + 5.0  # the stream ends a moment before the engine records the code
    while True:
        info = api.exec_inspect(exec_id)
        if not info.get("Running") or time.monotonic() > deadline:
            code = info.get("ExitCode")
            return int(code) if code is not None else None
        time.sleep(0.02)
