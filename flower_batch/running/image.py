"""Build the pinned runtime image — with no registry, and no network during the build.

Steps (each cached, so a rebuild with no change takes about a second and yields the same id):
1. base: `flower-batch-base:bookworm` made locally (debootstrap + docker import) unless it exists
   or another `base_image` is given (e.g. `python:3.11-slim-bookworm` where a registry answers);
2. wheelhouse: the locked deps (`uv export` of uv.lock, with hashes) downloaded on the host as
   linux x86_64 CPython 3.11 wheels into images/.cache/wheels, keyed by the requirements;
3. project wheel: `uv build --wheel`, keyed by a digest of the sources;
4. `docker build` of images/runtime/Dockerfile with network_mode=none, labelled with the versions
   and a build key over all inputs; an image already carrying that key is reused as it is.

`flower-batch image build` calls `build_image()` and prints `RuntimeImage.id`; jobs pin that id.
Where the Dockerfile, the base script, the lock and the project wheel come from, and where the
caches go (a checkout's images/.cache, an installed tool's user cache folder): image_sources.py.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from flower_batch.backend.base import ImageInfo
from flower_batch.backend.docker.images import DockerImages
from flower_batch.errors import ImageBuildError, ImageMissing, NotARuntimeImage
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.labels import BASE_IMAGE, BUILD_KEY, CLI_VERSION, LAYERED, SDK_VERSION, VERSION
from flower_batch.running.image_sources import CHECKOUT, ImageSources, installed_wheel, locate_sources

PROJECT_ROOT = CHECKOUT  # the checkout, when flower_batch runs from one (image_sources.py)
BASE_TAG = "flower-batch-base:bookworm-2"  # -2: with patchelf
DEFAULT_TAG = "flower-batch-runtime:latest"
RELOCATE_SCRIPT = "relocate-python.sh"
"""Beside the Dockerfile: makes the runtime's Python self-contained (the bundle, running/bundle.py)."""


# Wheels must run on the image's platform: Debian bookworm = glibc 2.36, CPython 3.11, x86_64.
TARGET_PYTHON = "3.11"
TARGET_GLIBC_MINOR = 36
_PLATFORMS = [f"manylinux_2_{m}_x86_64" for m in range(TARGET_GLIBC_MINOR, 4, -1)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
]
# What the imported base gets instead of a Dockerfile's ENV/CMD (docker import starts from nothing).
_BASE_CHANGES = [
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["/bin/bash"]',
]

# The Dockerfile's ARGs that carry each label (one LABEL step, not one step per label).
_BUILD_ARG = {
    VERSION: "FLOWER_BATCH_VERSION",
    SDK_VERSION: "SDK_VERSION",
    CLI_VERSION: "CLI_VERSION",
    BASE_IMAGE: "BASE_IMAGE_ID",
    BUILD_KEY: "BUILD_KEY",
}

Log = Callable[[str], None]


@dataclass(frozen=True)
class RuntimeImage:
    id: str
    """Immutable content id ("sha256:..."): what jobs pin."""
    tag: str | None
    flower_batch_version: str
    sdk_version: str
    cli_version: str
    base_image: str
    """Id of the base image it was built on."""
    size_bytes: int
    labels: dict[str, str]
    reused: bool = False
    """True when nothing changed and the existing image was returned without building."""

    @property
    def pinned(self) -> PinnedImage:
        versions = {
            "flower_batch": self.flower_batch_version,
            "sdk": self.sdk_version,
            "cli": self.cli_version,
        }
        return PinnedImage(self.id, versions)

    @classmethod
    def from_info(cls, info: ImageInfo, tag: str | None = None, reused: bool = False) -> RuntimeImage:
        labels = info.labels
        missing = [k for k in (VERSION, SDK_VERSION, CLI_VERSION) if not labels.get(k)]
        if missing:
            raise NotARuntimeImage(
                f"image {info.id[:19]} is not a flower-batch runtime image (no {missing[0]} label) — "
                "build one with `flower-batch image build`"
            )
        return cls(
            id=info.id,
            tag=tag if tag is not None else (info.tags[0] if info.tags else None),
            flower_batch_version=labels[VERSION],
            sdk_version=labels[SDK_VERSION],
            cli_version=labels[CLI_VERSION],
            base_image=labels.get(BASE_IMAGE, ""),
            size_bytes=info.size_bytes,
            labels=dict(labels),
            reused=reused,
        )


def pinned_image(ref: str) -> PinnedImage:
    """A runtime image by id or tag, pinned: what a job record keeps (ImageMissing if absent)."""
    return read_image(ref).pinned


def read_image(ref: str, docker_host: str | None = None) -> RuntimeImage:
    """The versions and labels of a runtime image by id or tag (ImageMissing if absent)."""
    images = DockerImages(docker_host)
    try:
        info = images.find(ref)
        if info is None:
            raise ImageMissing(
                f"image {ref} is not in the local Docker engine — build it with `flower-batch image build`"
            )
        return RuntimeImage.from_info(info, tag=ref if not ref.startswith("sha256:") else None)
    finally:
        images.close()


def build_image(
    *,
    tag: str = DEFAULT_TAG,
    base_image: str | None = None,
    network: bool = False,
    no_cache: bool = False,
    project_root: Path | None = None,
    cache_dir: Path | None = None,
    docker_host: str | None = None,
    log: Log | None = None,
    environ: Mapping[str, str] | None = None,
) -> RuntimeImage:
    """Build (or reuse) the runtime image and tag it `tag`; returns its id, versions and labels.

    environ: the command's environment, where an installed tool finds the user's cache folder.

    base_image: None → `flower-batch-base:bookworm`, made here with debootstrap when missing.
    network: allow network in RUN steps (only a base without git needs it); default: none.
    no_cache: rebuild every layer, even when an image with the same inputs exists.
    log: receives progress lines; default prints them to stderr.
    Raises ImageBuildError / DaemonUnavailable / OutOfDisk with a one-line message.

    In phases: the base (`_base`), the inputs and their build key (`_inputs`), an image that
    already carries that key (`_reuse`), else `docker build` (`_build`).
    """
    log = log or _stderr_log()
    sources = locate_sources(project_root, environ)
    cache = cache_dir or sources.cache
    cache.mkdir(parents=True, exist_ok=True)
    log(f"  from {sources.origin}; cache {cache}")
    started = time.monotonic()
    images = DockerImages(docker_host)
    try:
        base_ref, base_id = _base(images, base_image, sources.base_script, cache, log)
        inputs = _inputs(base_id, sources, cache, network, log)
        reused = None if no_cache else _reuse(images, tag, inputs.labels[BUILD_KEY])
        if reused is not None:
            log(f"✓ unchanged: reusing {reused.id} ({time.monotonic() - started:.1f}s)")
            return RuntimeImage.from_info(reused, tag=tag, reused=True)
        info = _build(images, tag, base_ref, inputs, cache, network, no_cache, log)
        log(f"✓ built {info.id} as {tag} ({time.monotonic() - started:.1f}s, {info.size_bytes / 1e6:.0f} MB)")
        return RuntimeImage.from_info(info, tag=tag)
    finally:
        images.close()


@dataclass(frozen=True)
class _BuildInputs:
    """What goes into the image: the Dockerfile, the locked requirements and their wheels, the
    project's wheel, and the labels (versions, base, build key over all of it)."""

    dockerfile: Path
    requirements: str
    wheels: list[Path]
    project_wheel: Path
    labels: dict[str, str]


def _base(
    images: DockerImages, base_image: str | None, base_script: Path, cache: Path, log: Log
) -> tuple[str, str]:
    """(the base's reference, its id): made with debootstrap when the default base is missing."""
    with _step(log, "base image"):
        base_ref = base_image or BASE_TAG
        base = images.find(base_ref)
        if base is None and base_image is None:
            make_base_image(images, base_script, cache, log)
            base = images.find(base_ref)
        base_id = base.id if base else base_ref  # an unknown registry base is pulled by the build
        log(f"  base {base_ref} = {base_id[:19]}")
    return base_ref, base_id


def _inputs(base_id: str, sources: ImageSources, cache: Path, network: bool, log: Log) -> _BuildInputs:
    """The wheelhouse and the project wheel (each cached), the versions and the build key. An
    installed tool builds from its packaged lock and from itself (image_sources.py)."""
    with _step(log, "wheelhouse"):
        if sources.lock is not None:
            requirements = sources.lock.read_text(encoding="utf-8")
        else:
            assert sources.checkout is not None
            requirements = export_requirements(sources.checkout)
        wheels = prepare_wheelhouse(requirements, cache / "wheels", log)
    with _step(log, "project wheel"):
        if sources.checkout is not None:
            project_wheel = build_project_wheel(sources.checkout, cache / "project", log)
        else:
            project_wheel = installed_wheel(cache / "project", log)
    versions = {
        VERSION: _wheel_version(project_wheel),
        SDK_VERSION: pinned_version(requirements, "claude-agent-sdk"),
        CLI_VERSION: bundled_cli_version(wheels),
    }
    dockerfile = sources.dockerfile
    # The Dockerfile and what it copies from beside it (relocate-python.sh) are one input.
    recipe = b"".join(p.read_bytes() for p in (dockerfile, dockerfile.with_name(RELOCATE_SCRIPT)))
    key = build_key(base_id, recipe, requirements, wheels, project_wheel, versions, network)
    labels = {**versions, BASE_IMAGE: base_id, BUILD_KEY: key}
    return _BuildInputs(dockerfile, requirements, wheels, project_wheel, labels)


def _reuse(images: DockerImages, tag: str, key: str) -> ImageInfo | None:
    """An image already built from these inputs, tagged `tag`. Prefers what `tag` already names,
    so a rebuild never flips between equal images."""
    current = images.find(tag)
    same = [current] if current and current.labels.get(BUILD_KEY) == key else []
    # a copy with the runtime layered onto a task image carries the key too: never the runtime
    built = [info for info in images.find_by_label(BUILD_KEY, key) if not info.labels.get(LAYERED)]
    for found in same or built[:1]:
        if tag not in found.tags:
            images.tag(found.id, tag)
        return found
    return None


def _build(
    images: DockerImages,
    tag: str,
    base_ref: str,
    inputs: _BuildInputs,
    cache: Path,
    network: bool,
    no_cache: bool,
    log: Log,
) -> ImageInfo:
    """`docker build` of the staged context, with no network unless `network`."""
    with _step(log, "docker build (network: " + ("allowed" if network else "none") + ")"):
        context = assemble_context(
            cache / "context", inputs.dockerfile, inputs.wheels, inputs.requirements, inputs.project_wheel
        )
        image_id = images.build(
            context,
            tag,
            {"BASE_IMAGE": base_ref, **{_BUILD_ARG[k]: v for k, v in inputs.labels.items()}},
            {},
            network_mode=None if network else "none",
            on_line=lambda line: log("  " + line),
            nocache=no_cache,
        )
    info = images.find(image_id)
    if info is None:
        raise ImageBuildError(f"the build reported {image_id} but the engine does not have it")
    return info


# -- base ------------------------------------------------------------------------------------
def make_base_image(
    images: DockerImages, script: Path, cache: Path, log: Log, suite: str = "bookworm"
) -> str:
    """debootstrap a minimal Debian into the cache, `docker import` it as BASE_TAG, drop the rootfs."""
    rootfs = cache / f"rootfs-{suite}"
    if rootfs.exists():
        shutil.rmtree(rootfs)  # a half-made rootfs from an interrupted run
    log(f"  no {BASE_TAG} in the engine: making it with debootstrap (about a minute)")
    try:
        _run_logged(["sh", str(script), str(rootfs), suite], log, what="debootstrap of the base image")
        log(f"  importing {rootfs} as {BASE_TAG}")
        return images.import_rootfs(rootfs, BASE_TAG, _BASE_CHANGES)
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)


# -- wheels ----------------------------------------------------------------------------------
def export_requirements(project_root: Path) -> str:
    """The locked runtime deps of the project, pinned with hashes (never re-resolved)."""
    out = _run(
        [_uv(), "export", "--frozen", "--no-dev", "--no-emit-project", "--no-header", "--quiet"],
        cwd=project_root,
        what="uv export of uv.lock",
    )
    if "claude-agent-sdk==" not in out:
        raise ImageBuildError(
            "uv export produced no claude-agent-sdk pin — is uv.lock the project's lock file?"
        )
    return out


def prepare_wheelhouse(requirements: str, wheel_dir: Path, log: Log) -> list[Path]:
    """Download the locked wheels for the image's platform once per distinct requirements."""
    key = _sha256(requirements.encode() + repr(_PLATFORMS).encode() + TARGET_PYTHON.encode())
    stamp = wheel_dir / ".key"
    if stamp.exists() and stamp.read_text() == key:
        wheels = sorted(wheel_dir.glob("*.whl"))
        log(f"  cached: {len(wheels)} wheels in {wheel_dir}")
        return wheels
    tmp = wheel_dir.with_name(wheel_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    req_file = tmp / "requirements.txt"
    req_file.write_text(requirements)
    platform_args = [arg for p in _PLATFORMS for arg in ("--platform", p)]
    log(f"  downloading wheels for cp{TARGET_PYTHON.replace('.', '')} manylinux x86_64 (hash-checked)")
    _run_logged(
        [
            *_pip(),
            "download",
            "--quiet",
            "--require-hashes",
            "--only-binary=:all:",
            *platform_args,
            "--python-version",
            TARGET_PYTHON,
            "--implementation",
            "cp",
            "--abi",
            "cp" + TARGET_PYTHON.replace(".", ""),
            "-r",
            str(req_file),
            "-d",
            str(tmp),
        ],
        log,
        what="pip download of the locked wheels",
    )
    req_file.unlink()
    (tmp / ".key").write_text(key)
    shutil.rmtree(wheel_dir, ignore_errors=True)
    tmp.rename(wheel_dir)
    wheels = sorted(wheel_dir.glob("*.whl"))
    log(f"  {len(wheels)} wheels, {sum(w.stat().st_size for w in wheels) / 1e6:.0f} MB")
    return wheels


def build_project_wheel(project_root: Path, out_dir: Path, log: Log) -> Path:
    """flower-batch's own wheel, rebuilt only when its sources change (hatchling's wheels are
    reproducible, so even a rebuild gives identical bytes)."""
    digest = _sha256(b"".join(_source_fingerprint(project_root)))
    stamp = out_dir / ".key"
    existing = sorted(out_dir.glob("*.whl"))
    if stamp.exists() and stamp.read_text() == digest and len(existing) == 1:
        log(f"  cached: {existing[0].name}")
        return existing[0]
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    _run(
        [_uv(), "build", "--wheel", "--quiet", "--out-dir", str(out_dir)],
        cwd=project_root,
        what="uv build of the project wheel",
    )
    built = sorted(out_dir.glob("*.whl"))
    if len(built) != 1:
        raise ImageBuildError(f"uv build left {len(built)} wheels in {out_dir}, expected one")
    stamp.write_text(digest)
    log(f"  built {built[0].name}")
    return built[0]


def bundled_cli_version(wheels: Iterable[Path]) -> str:
    """The Claude Code CLI version bundled in the claude-agent-sdk wheel (read from the wheel)."""
    for wheel in wheels:
        if wheel.name.startswith("claude_agent_sdk-"):
            with zipfile.ZipFile(wheel) as zf:
                try:
                    text = zf.read("claude_agent_sdk/_cli_version.py").decode()
                except KeyError:
                    break
            m = re.search(r"__cli_version__\s*=\s*['\"]([^'\"]+)['\"]", text)
            if m:
                return m.group(1)
    raise ImageBuildError(
        "cannot find the bundled CLI version in the claude-agent-sdk wheel of the wheelhouse"
    )


# -- helpers ---------------------------------------------------------------------------------
def _source_fingerprint(root: Path) -> Iterable[bytes]:
    # The wheel carries the lock, the Dockerfile and the base script too (hatch_build.py).
    paths = [root / n for n in ("pyproject.toml", "README.md", "hatch_build.py", "uv.lock")]
    paths += [root / "images" / "runtime" / n for n in ("Dockerfile", RELOCATE_SCRIPT)]
    paths.append(root / "images" / "base" / "mkrootfs.sh")
    for pkg in ("flower", "flower_batch"):
        paths += [p for p in (root / pkg).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    for path in sorted(paths):
        if path.exists():
            yield str(path.relative_to(root)).encode() + b"\0" + _sha256(path.read_bytes()).encode()


def build_key(
    base_id: str,
    dockerfile: bytes,
    requirements: str,
    wheels: list[Path],
    project_wheel: Path,
    versions: dict[str, str],
    network: bool,
) -> str:
    h = hashlib.sha256()
    for part in (base_id, _sha256(dockerfile), requirements, repr(sorted(versions.items())), str(network)):
        h.update(part.encode() + b"\0")
    for w in wheels:  # pip verified their hashes; name + size guards against a tampered cache dir
        h.update(f"{w.name}:{w.stat().st_size}\0".encode())
    h.update(_sha256(project_wheel.read_bytes()).encode())
    return h.hexdigest()[:32]


def assemble_context(
    ctx: Path, dockerfile: Path, wheels: list[Path], requirements: str, project_wheel: Path
) -> Path:
    """The build context: the Dockerfile and its script, hard links to the cached wheels."""
    shutil.rmtree(ctx, ignore_errors=True)
    (ctx / "wheels").mkdir(parents=True)
    (ctx / "project").mkdir()
    shutil.copyfile(dockerfile, ctx / "Dockerfile")
    shutil.copyfile(dockerfile.with_name(RELOCATE_SCRIPT), ctx / RELOCATE_SCRIPT)
    (ctx / "wheels" / "requirements.txt").write_text(requirements)
    for src, dest_dir in [*((w, ctx / "wheels") for w in wheels), (project_wheel, ctx / "project")]:
        try:
            os.link(src, dest_dir / src.name)
        except OSError:
            shutil.copy2(src, dest_dir / src.name)
    return ctx


def _wheel_version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def pinned_version(requirements: str, name: str) -> str:
    m = re.search(rf"^{re.escape(name)}==(\S+)", requirements, re.MULTILINE)
    if not m:
        raise ImageBuildError(f"{name} is not pinned in the exported requirements")
    return m.group(1)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _uv() -> str:
    uv = shutil.which("uv")
    if not uv:
        raise ImageBuildError(
            "`uv` is needed to export the lock file and build the wheel — install it (pip install uv)"
        )
    return uv


def _pip() -> list[str]:
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    return [_uv(), "tool", "run", "--from", "pip", "pip"]  # the project venv (uv sync) has no pip


def _run(cmd: list[str], cwd: Path | None = None, what: str = "") -> str:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise ImageBuildError(f"{what} failed: cannot run {cmd[0]}: {exc}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ImageBuildError(f"{what} failed (exit {done.returncode}): {' | '.join(tail)}")
    return done.stdout


def _run_logged(cmd: list[str], log: Log, what: str) -> None:
    with tempfile.TemporaryFile("w+") as errors:
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, text=True)
        except OSError as exc:
            raise ImageBuildError(f"{what} failed: cannot run {cmd[0]}: {exc}") from None
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip():
                log("  " + line.rstrip())
        code = proc.wait()
        if code != 0:
            errors.seek(0)
            tail = errors.read().strip().splitlines()[-3:]
            raise ImageBuildError(f"{what} failed (exit {code}): {' | '.join(tail)}")


class _step:
    """Logs a step's start and its duration."""

    def __init__(self, log: Log, name: str):
        self.log, self.name = log, name

    def __enter__(self) -> None:
        self.t0 = time.monotonic()
        self.log(f"▸ {self.name}")

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None:
            self.log(f"  {self.name}: {time.monotonic() - self.t0:.1f}s")


def _stderr_log() -> Log:
    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True, highlight=False)

    def log(line: str) -> None:
        if line.startswith(("▸", "✓")):
            console.print(f"[bold]{escape(line)}[/]", soft_wrap=True)
        else:
            console.print(f"[dim]{escape(line)}[/]", soft_wrap=True)

    return log


def main() -> None:
    """`python -m flower_batch.running.image`: build (or reuse) the runtime image and print its id."""
    from flower_batch.errors import FlowerBatchError

    try:
        print(build_image().id)
    except FlowerBatchError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
