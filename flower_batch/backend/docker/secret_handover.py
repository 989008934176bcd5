"""Secrets on the local engine, which has no secret store, without `docker inspect` showing them
and without a byte on the host's disk:

* the container gets a tmpfs at /run/secrets (mode 0700, its own uid's) and env NAME_FILE
  pointing into it: paths, never values;
* it is created with its stdin open for one attach (`docker run -i`), and its command starts
  under a few lines of `sh` (RECEIVE) that unpack a tar of the values from stdin into the tmpfs
  (umask 377: mode 0400), read the names FB_SECRET_NAMES lists into env NAME, and exec the
  command with stdin from /dev/null;
* every start is `attach stdin, start, send the tar, close`: the values are on their way before
  the command's first instruction, with no exec and no poll (an exec cost the engine 0.1-0.3 s a
  container, on the way to the job's first model request).

Why stdin: a container's env, command and labels are its configuration, which inspect shows; a
file put with `docker cp` (put_archive) lands in the container's layer on the host's disk (never
in a tmpfs); a bind-mounted file is on the host. An attached stdin is a stream from the
orchestrator's memory into the container's memory, kept nowhere. A tmpfs lives for one start of
the container, so every start (a restarted gateway's too) is handed over again. The engine's own
restart would start it with no one attached: such containers are restarted by their supervisor.

Only `sh`, `tar`, `timeout` and `cat` are needed in the image: no Python start-up before the
command.
"""

from __future__ import annotations

import io
import socket
import tarfile
import time
from typing import Any

from flower_batch.backend.base import ContainerSpec
from flower_batch.backend.secret_env import SECRET_NAMES_ENV, SECRETS_DIR
from flower_batch.errors import BackendError, escape_controls

TMPFS = "rw,nosuid,nodev,noexec,size=64k,mode=0700"
WAIT_S = 120  # longer than the gateway supervisor's longest backoff (10 s)
SEND_TIMEOUT_S = 60.0
RECEIVE = (
    # umask in a subshell: the command itself keeps the container's
    f"(umask 377; exec timeout {WAIT_S} tar -x -f - -C {SECRETS_DIR} --no-same-owner --no-same-permissions "
    f"2>/dev/null); got=$?; if [ $got -eq 124 ]; then "
    f'echo "flower-batch: no secrets were handed to {SECRETS_DIR} within {WAIT_S}s" >&2; exit 125; '
    f'elif [ $got -ne 0 ]; then echo "flower-batch: the secrets handed to {SECRETS_DIR} were cut short" >&2; '
    f"exit 125; fi; "
    f'IFS=,; for n in ${{{SECRET_NAMES_ENV}:-}}; do export "$n=$(cat "{SECRETS_DIR}/$n")"; done; '
    f'unset IFS {SECRET_NAMES_ENV}; exec "$@" </dev/null'
)


def receiving(spec: ContainerSpec) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """The command, env and tmpfs mounts of a container that gets `spec.secrets` (not empty) by
    hand-over: the values are in none of them. It is created with its stdin open (`stdin_open`)."""
    uid, _, gid = spec.user.partition(":")
    env = {**spec.env, **{f"{name}_FILE": f"{SECRETS_DIR}/{name}" for name in spec.secrets}}
    if spec.secrets_as_env:
        env[SECRET_NAMES_ENV] = ",".join(spec.secrets)
    tmpfs = {**spec.confinement.tmpfs, SECRETS_DIR: f"{TMPFS},uid={uid},gid={gid or uid}"}
    return ["sh", "-c", RECEIVE, "flower-batch-secrets", *spec.command], env, tmpfs


def secrets_tar(secrets: dict[str, str]) -> bytes:
    """The values as a tar in memory: one 0400 file per name, any bytes (a newline, a PEM)."""
    buf = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, value in secrets.items():
            data = value.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o400, now
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def start_handing_over(api: Any, container_id: str, secrets: dict[str, str]) -> None:
    """Start the container with `secrets` (at least one) on its stdin: attached before the start,
    so nothing is lost, and closed after them, so its `tar` ends. Blocking (the docker SDK);
    raises BackendError when the values could not be sent (the engine errors of the start
    itself propagate as they are)."""
    blob = secrets_tar(secrets)
    stream = api.attach_socket(container_id, params={"stdin": 1, "stream": 1})
    raw = getattr(stream, "_sock", stream)  # the connection under docker-py's SocketIO wrapper
    try:
        api.start(container_id)
        try:
            raw.settimeout(SEND_TIMEOUT_S)
            raw.sendall(blob)
            raw.shutdown(socket.SHUT_WR)  # end of stdin: the engine closes it (stdin once)
        except OSError as exc:
            raise BackendError(
                f"container {container_id[:12]}: could not hand it its secrets on stdin: {escape_controls(str(exc))}"
            ) from None
    finally:
        stream.close()
