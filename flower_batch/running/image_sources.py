"""Where `image build` finds what it builds from, and where it caches.

Two origins, one shape (`ImageSources`):

- the checkout (the repository, `uv sync`: flower_batch is imported from its sources there): the
  Dockerfile and base script under images/, the lock exported from uv.lock, the project wheel
  built from the sources, caches in images/.cache (as `make image` and the tests have them);
- an installed tool (`pip install`, `uv tool install`, `pipx install` of the wheel or the sdist):
  the same files shipped inside the package (flower_batch/image_build/, hatch_build.py put them
  there with the lock exported when the wheel was built), the project wheel made again from the
  installed distribution itself (its files, byte for byte, as the installer wrote them), and
  caches in the user's cache folder ($XDG_CACHE_HOME/flower-batch/image, else
  ~/.cache/flower-batch/image), never in site-packages. No uv, no pyproject.toml of whatever
  project the command runs in, is read.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.resources
import json
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import flower_batch
from flower.versions import PROJECT
from flower_batch.backend.docker.loopback_hosts import cache_folder
from flower_batch.errors import ImageBuildError

CHECKOUT = Path(flower_batch.__file__).resolve().parents[1]  # the checkout's root, when it is one
PACKAGED = "image_build"  # flower_batch/image_build/ in an installed wheel (hatch_build.py)
LOCK_NAME = "requirements.lock"
# Every entry of a rebuilt wheel carries this time: the same installed files give the same bytes.
_ZIP_TIME = (2020, 2, 2, 0, 0, 0)

Log = Callable[[str], None]


@dataclass(frozen=True)
class ImageSources:
    origin: str  # "checkout <path>" or "installed <path>": what `--version` and the build log say
    dockerfile: Path
    base_script: Path
    cache: Path
    checkout: Path | None  # the repository, when building from one
    lock: Path | None  # the packaged lock (installed); None: export uv.lock (checkout)


def is_checkout(root: Path) -> bool:
    """A repository of flower-batch whose sources are the flower_batch imported now."""
    return (
        (root / "pyproject.toml").is_file()
        and (root / "uv.lock").is_file()
        and (root / "images" / "runtime" / "Dockerfile").is_file()
    )


def locate_sources(
    project_root: Path | None = None, environ: Mapping[str, str] | None = None
) -> ImageSources:
    """The sources of this flower-batch: its checkout when it runs from one (or `project_root`
    is given: tests build from a copy), else the files installed with it. `environ`: the
    command's, for the user's cache folder."""
    root = project_root or CHECKOUT
    if is_checkout(root):
        return ImageSources(
            origin=f"checkout {root}",
            dockerfile=root / "images" / "runtime" / "Dockerfile",
            base_script=root / "images" / "base" / "mkrootfs.sh",
            cache=root / "images" / ".cache",
            checkout=root,
            lock=None,
        )
    packaged = Path(str(importlib.resources.files(flower_batch) / PACKAGED))
    shipped = ("Dockerfile", "relocate-python.sh", "mkrootfs.sh", LOCK_NAME)  # hatch_build.py's FILES
    missing = [n for n in shipped if not (packaged / n).is_file()]
    if missing:
        raise ImageBuildError(
            f"this flower-batch ({Path(flower_batch.__file__).parent}) has no {PACKAGED}/{missing[0]}: "
            "it was not installed from a wheel or sdist built by hatch_build.py; reinstall it from one"
        )
    cache = cache_folder(environ or {})
    if cache is None:
        raise ImageBuildError("no cache folder: set XDG_CACHE_HOME or HOME (image build caches wheels there)")
    return ImageSources(
        origin=f"installed {Path(flower_batch.__file__).parent.parent}",
        dockerfile=packaged / "Dockerfile",
        base_script=packaged / "mkrootfs.sh",
        cache=cache / "image",
        checkout=None,
        lock=packaged / LOCK_NAME,
    )


def install_origin() -> str:
    """Where this flower-batch runs from, in one line: its checkout, or the folder it is installed
    in and what it was installed from (PEP 610's direct_url.json, when the installer wrote one)."""
    if is_checkout(CHECKOUT):
        return f"checkout {CHECKOUT}"
    where = f"installed in {Path(flower_batch.__file__).parent.parent}"
    try:
        raw = importlib.metadata.distribution(PROJECT).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return where
    try:
        url = json.loads(raw).get("url") if raw else None
    except ValueError:
        url = None
    return f"{where} from {url}" if isinstance(url, str) else where


def installed_wheel(out_dir: Path, log: Log) -> Path:
    """The installed distribution as a wheel again: every file its RECORD lists under
    site-packages (not the console scripts, not the bytecode the installer compiled), with its
    dist-info and a RECORD of their hashes. Cached by the RECORD's digest: unchanged files, the
    same wheel."""
    dist = importlib.metadata.distribution(PROJECT)
    files = [f for f in dist.files or () if _belongs_in_wheel(str(f))]
    if not files:
        raise ImageBuildError(
            f"the installed {PROJECT} lists no files (no RECORD): reinstall it from its wheel"
        )
    version = dist.version
    name = f"flower_batch-{version}-py3-none-any.whl"
    record_text = dist.read_text("RECORD") or ""
    key = hashlib.sha256(record_text.encode()).hexdigest()
    wheel, stamp = out_dir / name, out_dir / ".key"
    if wheel.is_file() and stamp.is_file() and stamp.read_text() == key:
        log(f"  cached: {name} (from the installed distribution)")
        return wheel
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.whl"):
        old.unlink()
    rows = []
    tmp = out_dir / (name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(files, key=str):
            rel = str(f)
            if rel.endswith(".dist-info/RECORD"):
                continue
            data = Path(str(f.locate())).read_bytes()
            _write(zf, rel, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{rel},sha256={digest},{len(data)}")
        record = f"flower_batch-{version}.dist-info/RECORD"
        _write(zf, record, ("\n".join([*rows, f"{record},,"]) + "\n").encode())
    tmp.rename(wheel)
    stamp.write_text(key)
    log(f"  made {name} from the installed distribution")
    return wheel


def _belongs_in_wheel(rel: str) -> bool:
    if rel.startswith("..") or "__pycache__" in rel or rel.endswith(".pyc"):
        return False  # console scripts live outside site-packages; bytecode is the installer's
    top = rel.split("/", 1)[0]
    return (
        top in ("flower", "flower_batch")
        or top.endswith(".dist-info")
        and not rel.endswith(("INSTALLER", "REQUESTED", "direct_url.json", "uv_cache.json", "uv_build.json"))
    )


def _write(zf: zipfile.ZipFile, rel: str, data: bytes) -> None:
    info = zipfile.ZipInfo(rel, date_time=_ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)
