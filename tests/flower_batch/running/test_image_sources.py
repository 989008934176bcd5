"""What an installed flower-batch builds its runtime image from (issue 34): the wheel carries the
Dockerfile, the base script and the lock exported from uv.lock when it was built (a test that
fails when the packaged lock drifts from uv.lock), and an installed tool finds them there, caches
in the user's cache folder, and makes the project wheel again from its installed files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from flower_batch.running import image

REPO = image.PROJECT_ROOT
UV = [os.environ.get("UV", "uv")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    env = {**os.environ, "PATH": f"{Path.home() / '.local' / 'bin'}:{os.environ.get('PATH', '')}"}
    subprocess.run([*UV, "build", "--wheel", "--quiet", "--out-dir", str(out)], cwd=REPO, env=env, check=True)
    (found,) = out.glob("*.whl")
    return found


def test_the_wheel_ships_the_build_files_and_the_lock_of_uv_lock(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        lock = zf.read("flower_batch/image_build/requirements.lock").decode()
        dockerfile = zf.read("flower_batch/image_build/Dockerfile")
        script = zf.read("flower_batch/image_build/mkrootfs.sh")
        relocate = zf.read("flower_batch/image_build/relocate-python.sh")
    assert lock == image.export_requirements(REPO)  # drifts from uv.lock: this fails
    assert "--hash=sha256:" in lock and image.pinned_version(lock, "claude-agent-sdk") == "0.2.184"
    assert dockerfile == (REPO / "images" / "runtime" / "Dockerfile").read_bytes()
    assert script == (REPO / "images" / "base" / "mkrootfs.sh").read_bytes()
    assert relocate == (REPO / "images" / "runtime" / "relocate-python.sh").read_bytes()


def test_the_checkout_builds_from_its_own_files() -> None:
    from flower_batch.running.image_sources import locate_sources

    sources = locate_sources(environ=os.environ)
    assert sources.checkout == REPO and sources.cache == REPO / "images" / ".cache" and sources.lock is None


INSTALLED = """
import json, os, sys
from pathlib import Path
from flower_batch.running.image_sources import install_origin, installed_wheel, locate_sources
s = locate_sources(environ=os.environ)
first = installed_wheel(Path(sys.argv[1]), lambda line: None)
again = installed_wheel(Path(sys.argv[1]), lambda line: None)
print(json.dumps({"origin": s.origin, "lock": str(s.lock), "cache": str(s.cache), "dockerfile": str(s.dockerfile),
                  "checkout": s.checkout, "wheel": str(first), "same": first.read_bytes() == again.read_bytes(),
                  "where": install_origin()}))
"""


def test_an_installed_tool_finds_its_files_caches_in_xdg_and_rebuilds_itself(
    wheel: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site-packages"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)  # what an installer writes (RECORD lists the files)
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-c", INSTALLED, str(out)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["origin"] == f"installed {site}" and got["checkout"] is None
    assert got["lock"] == str(site / "flower_batch" / "image_build" / "requirements.lock")
    assert got["dockerfile"] == str(site / "flower_batch" / "image_build" / "Dockerfile")
    assert got["cache"] == str(tmp_path / "xdg" / "flower-batch" / "image")
    assert got["where"] == f"installed in {site}" and got["same"]
    assert not list(site.rglob(".cache"))  # nothing written into site-packages
    with zipfile.ZipFile(wheel) as a, zipfile.ZipFile(got["wheel"]) as b:
        names = sorted(n for n in a.namelist() if not n.endswith("RECORD"))
        assert names == sorted(n for n in b.namelist() if not n.endswith("RECORD"))
        assert all(a.read(n) == b.read(n) for n in names)  # the installed distribution itself
