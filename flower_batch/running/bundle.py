"""flower brought into an image it did not build: the runtime bundle, and the probe of an image.

The runtime image's /opt/flower is self-contained (images/runtime/relocate-python.sh): a venv on
a Python with its own glibc and libraries, flower, claude-agent-sdk and its bundled CLI, all
pinned by `image build`. Its contents are copied once, per runtime build, into a named volume
(`flower-runtime-<build key>`), which every job in a task image mounts read-only at the same
path. Nothing is installed or downloaded at job start; the job needs no network; the image's
own Python, PATH and libraries are what the agent's tools see (no PYTHONPATH, no
LD_LIBRARY_PATH of flower's anywhere).

Measured against the other design (the bundle layered onto each task image, bench/task_image.py):
the volume costs nothing per new task image, where a layer of ~500 MB costs its copy and commit.

`probe` runs the bundle once in an image, before any job folder is touched: an image flower
cannot run in (another architecture, no /bin/sh, no glibc the CLI can use: musl/Alpine) is
refused with one line naming it and the reason.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from flower_batch.backend.confinement import sandbox_user
from flower_batch.backend.docker.images import DockerImages
from flower_batch.errors import FlowerBatchError, ImageUnsupported, NotARuntimeImage
from flower_batch.labels import BUILD_KEY, RUNTIME_BUNDLE

BUNDLE_PATH = "/opt/flower"
"""Where flower is, in every job's container: the runtime image's own, or the bundle's mount."""
FLOWER = f"{BUNDLE_PATH}/bin/flower"
TOOLS_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""PATH of the agent's commands and the check in the runtime image: its own, without flower's
venv (/opt/flower/bin), so their python3 and pip are the image's, as in a task's own image."""

Log = Callable[[str], None]

# The image's own loader runs the CLI (a glibc program: musl has none at this path); the bundle's
# Python runs on its own glibc whatever the image has.
_HAS_GLIBC = """
test -e /lib64/ld-linux-x86-64.so.2 || { echo "flower-probe: no-glibc"; exit 3; }
"""
_PROBE = (
    _HAS_GLIBC
    + """out=$(/opt/flower/bin/claude --version 2>&1) || { echo "flower-probe: cli $out" | tail -c 300; exit 4; }
/opt/flower/bin/python3 -c "import flower.runtime.engine" || exit 5
echo "flower-probe: ok"
"""
)


def volume_name(build_key: str) -> str:
    return f"flower-runtime-{build_key[:16]}"


def bundle_volume(images: DockerImages, runtime_id: str, log: Log) -> str:
    """The volume holding the runtime image's /opt/flower, made when missing (once per runtime
    build: a few seconds, then free). A second volume marks it complete, so a copy cut short is
    never used: it is made again."""
    info = images.find(runtime_id)
    key = info.labels.get(BUILD_KEY) if info else None
    if not key:
        raise NotARuntimeImage(
            f"image {runtime_id[:19]} carries no {BUILD_KEY} label: build the runtime with `flower-batch image build`"
        )
    name, ready = volume_name(key), volume_name(key) + "-ready"
    if images.volume_exists(ready):
        return name
    with _lock(name):
        if images.volume_exists(ready):
            return name
        log(f"copying the flower runtime ({runtime_id[:19]}) into volume {name}, once")
        images.remove_volume(name)  # half-filled by a copy that was cut short
        images.create_volume(name, {RUNTIME_BUNDLE: key})
        # An empty volume mounted where the image has files gets a copy of them (the engine's own).
        code, output = images.run_to_end(
            runtime_id,
            [f"{BUNDLE_PATH}/bin/python3", "-c", "pass"],
            volumes={name: (BUNDLE_PATH, False)},
            user=sandbox_user(),
        )
        if code != 0:
            raise FlowerBatchError(
                f"could not fill volume {name} with the flower runtime: {output.strip()[-200:]}"
            )
        images.create_volume(ready, {RUNTIME_BUNDLE: key})
    return name


def probe(images: DockerImages, image_id: str, volume: str | None, cache: Path, describe: str) -> None:
    """Refuse, with one line, an image flower cannot run in. Remembered per (image, bundle) in
    `cache` (a JSON file of the home's), so a second run pays nothing. `volume` None: the image
    holds flower itself (a cluster's layered image, running/layered.py)."""
    seen = _read_cache(cache)
    key = f"{image_id} {volume or 'layered'}"
    if seen.get(key) == "ok":
        return
    _refuse_another_arch(images, image_id, describe)
    code, output = images.run_to_end(
        image_id,
        ["/bin/sh", "-c", _PROBE],
        volumes={volume: (BUNDLE_PATH, True)} if volume else {},
        user=sandbox_user(),
        env={"HOME": "/tmp"},
    )
    if code != 0:
        raise ImageUnsupported(f"image {describe} cannot run flower: {_reason(code, output)}")
    seen[key] = "ok"
    _write_cache(cache, seen)


def probe_without_flower(images: DockerImages, image_id: str, describe: str) -> None:
    """The part of the probe an image answers without flower in it (its architecture, a
    /bin/sh, a glibc loader): what a cluster checks before it layers the runtime onto an image
    (running/layered.py), so that an Alpine image costs no layer."""
    _refuse_another_arch(images, image_id, describe)
    code, output = images.run_to_end(
        image_id, ["/bin/sh", "-c", _HAS_GLIBC], volumes={}, user=sandbox_user(), env={"HOME": "/tmp"}
    )
    if code != 0:
        raise ImageUnsupported(f"image {describe} cannot run flower: {_reason(code, output)}")


def _refuse_another_arch(images: DockerImages, image_id: str, describe: str) -> None:
    info = images.find(image_id)
    if info is not None and info.architecture and info.architecture != "amd64":
        raise ImageUnsupported(
            f"image {describe} is for {info.architecture}: flower runs in x86_64 (amd64) images only"
        )


def _reason(code: int, output: str) -> str:
    text = " ".join(output.split())
    if code == 127 and "/bin/sh" in text:
        return "it has no /bin/sh (flower needs a POSIX shell at /bin/sh)"
    if code == 3:
        return "it has no glibc (/lib64/ld-linux-x86-64.so.2), e.g. Alpine's musl; use a Debian 11+ or Ubuntu 20.04+ based image"
    if code == 4:
        detail = text.split("flower-probe: cli", 1)[-1].strip()[:160]
        return f"the Claude Code CLI does not start in it (needs glibc 2.26 or newer): {detail}"
    return f"the probe ended with exit {code}: {text[-200:]}"


def _lock(name: str) -> _FileLock:
    return _FileLock(Path(tempfile.gettempdir()) / f"flower-batch-{name}.lock")


def build_lock(key: str) -> _FileLock:
    """One build of a task folder (by its key) at a time on this machine."""
    return _lock("build-" + key.removeprefix("sha256:")[:16])


class _FileLock:
    """One filler of a volume at a time on this machine (two orchestrators may start together)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1

    def __enter__(self) -> None:
        self._fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)


def _read_cache(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_cache(path: Path, data: dict[str, str]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # two orchestrators write at once
        tmp.write_text(json.dumps(data))
        tmp.replace(path)
    except OSError:
        pass  # a cache: the next run probes again
