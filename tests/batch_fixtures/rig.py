"""The Docker test rig of flower-batch: the real `flower-batch` command as a subprocess, the
runtime image built once per test session, and what the Docker engine holds with our labels.

Every test gets its own home (`--home`), so records, sessions and gateway logs never mix with
a developer's `volumes/` or with another test. Leftovers are looked up by the session ids of
that home (each gateway leaves `<home>/<batch>/.gateway/fb-<batch>-<session>…`), so a test never
mistakes another process's live jobs for its own leaks.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
PROJECT = Path(__file__).resolve().parent / "project"
FLOWER_BATCH = REPO / ".venv" / "bin" / "flower-batch"
TEST_TAG = "flower-batch-runtime:batch-tests"  # our own tag: never moves `latest` under anyone

MANAGED = "org.flower-batch.managed"
BATCH = "org.flower-batch.batch"
JOB = "org.flower-batch.job"
ROLE = "org.flower-batch.role"
VERSION = "org.flower-batch.version"
LEASE = "org.flower-batch.session"  # the orchestrator lease's label (flower_batch/labels.py)
ANSI = re.compile(r"\x1b\[")


# -- the image ------------------------------------------------------------------------------
@functools.cache
def runtime_image() -> str:
    """The runtime image of the current sources, built once per test process (cached by the
    build itself too: fast when nothing changed). These tests are marked `docker`: with no
    engine they fail (deselect them with -m "not docker"), they never pass as skipped."""
    from flower_batch.running.image import build_image

    with image_build_lock():
        return build_image(tag=TEST_TAG, log=lambda line: None).id


def image_build_lock() -> Any:
    """One image build at a time among the test processes (parallel workers, the background
    cluster bring-up): builds share images/.cache (the wheelhouse, the project wheel, remade
    in place when the sources differ); the next one then finds the image built and reuses it."""
    from filelock import FileLock

    (REPO / "images" / ".cache").mkdir(parents=True, exist_ok=True)
    return FileLock(REPO / "images" / ".cache" / "test-image.lock", timeout=1800)


# -- the command ----------------------------------------------------------------------------
def command_env() -> dict[str, str]:
    """The environment of a CI job: no TTY, nothing forcing colour."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "FLOWER_BATCH_HOME")
    }
    env["COLUMNS"] = "160"
    return env


def fb(
    *args: str | Path, home: Path, timeout: float = 180, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    """Run `flower-batch ARGS --home HOME` to completion, output captured (so: no TTY)."""
    return subprocess.run(
        [str(FLOWER_BATCH), *map(str, args), "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=command_env(),
    )


def fb_start(*args: str | Path, home: Path, cwd: Path = REPO, log: Path) -> subprocess.Popen[str]:
    """Start `flower-batch ARGS --home HOME` in the background; stdout+stderr go to `log`."""
    out = log.open("w")
    proc = subprocess.Popen(
        [str(FLOWER_BATCH), *map(str, args), "--home", str(home)],
        stdout=out,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        env=command_env(),
        start_new_session=True,  # a signal for it never reaches pytest
    )
    STARTED.append(proc)
    return proc


STARTED: list[subprocess.Popen[str]] = []  # background orchestrators, stopped when their test ends


def kill_started() -> None:
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            sigkill_group(proc)


def one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    """Assert the command failed the way users are promised: exit 2, one line, no traceback."""
    text = (proc.stderr + proc.stdout).strip()
    where = " ".join(proc.args[1:3]) if isinstance(proc.args, list) else str(proc.args)
    assert proc.returncode == 2, f"{where}: exit {proc.returncode}: {text}"
    assert "Traceback" not in text, f"{where}: {text}"
    lines = [line for line in text.splitlines() if line.startswith("flower-batch:")]
    assert len(lines) == 1, f"{where}: {text}"
    for word in words:
        assert word in lines[0], f"{where}: {lines[0]}"
    return lines[0]


def wait_for(what: str, predicate: Callable[[], Any], timeout: float = 60, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def sigkill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the orchestrator (it leads its own process group: no child outlives it either)."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


# -- a copy of the test project ---------------------------------------------------------------
def project_copy(dest: Path) -> Path:
    """A private copy of tests/batch_fixtures/project (tasks, scenarios, flows.py) to edit freely."""
    shutil.copytree(PROJECT, dest)
    return dest


# -- what a job left on the host --------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    home: Path
    batch: str
    job: str

    @property
    def root(self) -> Path:
        return self.home / self.batch / self.job

    def record(self) -> dict:
        return json.loads((self.root / "record.json").read_text())

    def manifest(self) -> list[dict]:
        path = self.root / "runs" / "manifest.json"
        return json.loads(path.read_text()) if path.exists() else []

    def lineage(self) -> dict:
        return json.loads((self.root / "runs" / "lineage.json").read_text())

    def gateway_log(self) -> list[dict]:
        path = self.root / "logs" / "gateway.jsonl"
        if not path.exists():
            return []
        from flower.scripted import read_request_log  # the one reader of the v2 format

        return list(read_request_log(path))

    def container_log(self) -> str:
        path = self.root / "logs" / "container.log"
        return path.read_text() if path.exists() else ""

    def status(self) -> str | None:
        try:
            return self.record()["status"]
        except (OSError, ValueError, KeyError):
            return None


def message_texts(request: dict) -> str:
    """Every text a logged Messages request carried: prompts, answers and tool results."""
    from flower.scripted.request import content_text  # the server's own reading of a message

    messages = request.get("body", {}).get("messages", [])
    return "\n".join(filter(None, (content_text(m.get("content")) for m in messages)))


# -- what Docker holds with our labels ----------------------------------------------------------
def docker_client() -> Any:
    import docker

    return docker.from_env()


def sessions_of(home: Path, batch: str) -> set[str]:
    """Ids of the orchestrator sessions that ran a gateway for `batch` under `home`."""
    from flower_batch.gateway.host.sidecar import gateway_name

    gw = home / batch / ".gateway"
    prefix = gateway_name(batch, "")  # the name with an empty session: "fb-<batch>-<digest>-"
    pattern = re.compile(rf"^{re.escape(prefix)}([0-9a-f]{{8}})")
    return {m.group(1) for p in (gw.iterdir() if gw.is_dir() else []) if (m := pattern.match(p.name))}


@dataclass
class Resources:
    containers: list[Any]
    networks: list[Any]
    volumes: list[Any]

    def __bool__(self) -> bool:
        return bool(self.containers or self.networks or self.volumes)

    def describe(self) -> str:
        return (
            ", ".join(
                [f"container {c.name} ({c.labels.get(ROLE)}, {c.status})" for c in self.containers]
                + [f"network {n.name}" for n in self.networks]
                + [f"volume {v.name}" for v in self.volumes]
            )
            or "nothing"
        )


def labelled(batch: str, sessions: set[str] | None = None) -> Resources:
    """Containers, networks and volumes with our labels for `batch` (and, if given, these sessions)."""
    client = docker_client()
    flt = {"label": [f"{MANAGED}=1", f"{BATCH}={batch}"]}

    def mine(labels: dict[str, str] | None) -> bool:
        return sessions is None or (labels or {}).get(LEASE) in sessions

    try:
        return Resources(
            # ignore_removed: docker-py inspects each container it listed, and one whose removal
            # was under way (its orchestrator's, or the engine finishing one a killed one asked
            # for) is gone by then: a 404 in CI
            containers=[
                c
                for c in client.containers.list(all=True, filters=flt, ignore_removed=True)
                if mine(c.labels)
            ],
            networks=[n for n in client.networks.list(filters=flt) if mine(n.attrs.get("Labels"))],
            volumes=[v for v in client.volumes.list(filters=flt) if mine(v.attrs.get("Labels"))],
        )
    finally:
        client.close()


def leftovers(home: Path, batch: str) -> Resources:
    """What this home's orchestrators left behind for `batch`."""
    sessions = sessions_of(home, batch)
    return labelled(batch, sessions) if sessions else Resources([], [], [])


def remove_leftovers(home: Path, batch: str, seen: Iterable[str] = ()) -> None:
    """Teardown of a module's batch: remove what this home's orchestrators left for `batch` (the
    sessions it shows now, and `seen`, taken earlier in case a test removed a session's folder),
    never what carries the same batch name from another run (a parallel worker, another checkout)."""
    sessions = set(seen) | sessions_of(home, batch)
    if sessions:
        remove_resources(labelled(batch, sessions))


def remove_resources(found: Resources) -> None:
    import docker.errors

    for remove in (
        [lambda c=c: c.remove(force=True) for c in found.containers]
        + [n.remove for n in found.networks]
        + [lambda v=v: v.remove(force=True) for v in found.volumes]
    ):
        try:
            remove()
        except docker.errors.NotFound:
            pass  # its orchestrator removed it meanwhile
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                raise  # else its orchestrator is removing it right now (409, seen in a full run)


def private_home(tmp_path: Path) -> Iterator[Path]:
    """A flower-batch home for one test (use as a generator fixture); whatever its orchestrators
    leaked is removed at the end, after the test has had its chance to assert there is none."""
    root = tmp_path / "home"
    root.mkdir()
    yield root
    kill_started()  # a failed test may leave its orchestrators running: they must not race the cleanup
    for batch in [p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]:
        remove_resources(leftovers(root, batch))


def loop_home(tmp_path: Path, size: int) -> Iterator[Path]:
    """A private home on an ext4 filesystem of its own of `size` bytes (a loop device), unmounted
    at the end (use as a generator fixture). Root only, as CI runs: a mount needs it."""
    if os.getuid() != 0:
        pytest.fail("this test runs as root, as CI does: it mounts a filesystem of its own")
    image = tmp_path / "home.img"
    with open(image, "wb") as f:
        f.truncate(size)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True)
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True)
    try:
        yield from private_home(mount)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill_disk(path: Path, *, leave: int) -> None:
    """A file taking the free space of `path`'s filesystem but `leave` bytes."""
    st = os.statvfs(path.parent)
    size = st.f_bavail * st.f_frsize - leave
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)
    if leave == 0:  # the last blocks fallocate left (metadata rounding): written until ENOSPC
        with open(path, "ab", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass
