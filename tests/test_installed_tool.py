"""flower-batch as a new user gets it (issue 34): the wheel built from this checkout, installed
outside it (a fresh venv, `uv tool install`, or the sdist into a fresh venv), used in a project
folder of the user's own (a git repository with a file and a failing test): `image build`,
`init`, `run .` with the default home; from the venv also `run . --check` failing, `run .
--persistent` then `wake`, a 2 x 2 `matrix`, `report`. Each step's output is checked; at the
end the project holds nothing but the home and init's files, the installed package no cache,
and no container of its batches is left.

The wheelhouse (the locked wheels, ~170 MB) the checkout's build downloaded is linked into the
tool's cache folder, so only the image's last steps are built here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.batch_fixtures.rig import REPO, image_build_lock, leftovers, runtime_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TAG = "flower-batch-runtime:installed-test"  # never `latest`: that one is the person's
USER_FILES = {".git", "calc.py", "test_calc.py"}
INIT_FILES = {"jobs.toml", "flows.py", "scenarios"}
CHECK = "test -s NOTES.md"


def uv() -> str:
    found = shutil.which("uv") or shutil.which("uv", path=str(Path.home() / ".local" / "bin"))
    assert found, "uv is needed (make prereqs installs it)"
    return found


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel built from it, as `uv build` makes them."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([uv(), "build", "--quiet", "--out-dir", str(out)], cwd=REPO, check=True)
    return out


def install(how: str, dist: Path, where: Path) -> Path:
    """The `flower-batch` of a tool installed outside the checkout: from the wheel into a fresh
    venv, from the sdist into a fresh venv (built there, its hook exporting the lock from the
    sdist's uv.lock), or from the wheel by `uv tool install`."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    (wheel,) = dist.glob("*.whl")
    if how in ("venv", "sdist"):  # python -m venv + an installer, as a user does by hand
        venv = where / "venv"
        source = wheel if how == "venv" else next(dist.glob("*.tar.gz"))
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, cwd=where)
        subprocess.run(
            [uv(), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), str(source)],
            check=True,
            cwd=where,
            env=env,
        )
        return venv / "bin" / "flower-batch"
    env |= {"UV_TOOL_DIR": str(where / "tools"), "UV_TOOL_BIN_DIR": str(where / "bin")}
    subprocess.run([uv(), "tool", "install", "--quiet", str(wheel)], check=True, cwd=where, env=env)
    return where / "bin" / "flower-batch"


@pytest.fixture
def user(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The user's environment: their own cache folder (with the checkout's wheelhouse linked
    in), no FLOWER_BATCH_HOME, no colour."""
    runtime_image()  # the checkout's build has downloaded the wheelhouse (and made the base image)
    wheels = REPO / "images" / ".cache" / "wheels"
    cache = tmp_path / "xdg"
    with image_build_lock():
        shutil.copytree(wheels, cache / "flower-batch" / "image" / "wheels", copy_function=os.link)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOWER_BATCH_", "VIRTUAL_ENV"))}
    env |= {"XDG_CACHE_HOME": str(cache), "COLUMNS": "160", "NO_COLOR": "1"}
    env.pop("FORCE_COLOR", None)
    yield env


def project(where: Path) -> Path:
    """A user's project: a git repository with a file and a failing test."""
    root = where / "proj"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    )
    git = ["git", "-c", "user.email=u@example.com", "-c", "user.name=u"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "."], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=root, check=True)
    return root


def records(home: Path, batch: str) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in (home / batch).glob("*/record.json")}


@pytest.mark.parametrize("how", ["venv", "uv-tool", "sdist"])
def test_the_installed_tool_works_in_a_project_of_its_own(
    how: str, dist: Path, user: dict[str, str], tmp_path: Path
) -> None:
    tool = install(how, dist, tmp_path)
    (wheel,) = dist.glob("*.whl")
    proj = project(tmp_path)
    batches: list[str] = []

    def fb(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(tool), *args], cwd=proj, env=user, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == code, f"{args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        return done

    try:
        (origin,) = [line for line in fb("--version").stdout.splitlines() if "runs from" in line]
        assert origin.startswith(f"flower-batch runs from: installed in {tmp_path}/"), origin
        assert "site-packages" in origin, origin
        shipped = wheel.name if how != "sdist" else next(dist.glob("*.tar.gz")).name
        assert shipped in origin, origin  # and from which file
        built = fb("image", "build", "--tag", TAG)
        assert "from installed" in built.stderr and str(user["XDG_CACHE_HOME"]) in built.stderr
        image_id = built.stdout.strip().splitlines()[-1]
        assert image_id.startswith("sha256:")

        fb("init")
        assert {p.name for p in proj.iterdir()} == USER_FILES | INIT_FILES
        assert fb("init", code=2).stderr.strip().count("\n") == 0  # one line: jobs.toml is there

        scenario = ["--scenario", "scenarios/offline.toml", "--check", CHECK, "--image", TAG]
        ran = fb("run", ".", "-f", "flows.py:main", *scenario, "--name", "first")
        assert "first: passed" in ran.stderr
        job = proj / "volumes" / "adhoc" / "first"
        assert (job / "workspace" / "NOTES.md").read_text().startswith("A project.")
        assert not (job / "workspace" / "volumes").exists()  # the home is never copied into a job
        assert (job / "workspace" / "calc.py").read_text() == (proj / "calc.py").read_text()
        batches.append("adhoc")
        # nothing written into the installed package, wherever the installer put it
        assert not list(Path(str(tool)).resolve().parent.parent.rglob(".cache"))
        # What `uv tool` and the sdist may get wrong is where they install and what they package:
        # they build their image and run. The walk past that runs the same files of the same wheel
        # whatever installed them: the venv's alone.
        if how == "venv":
            # --check is the verdict: the project's test still fails (the offline model wrote notes only).
            fb(
                "run",
                ".",
                "-f",
                "flows.py:main",
                *scenario[:2],
                "--check",
                "grep -q 'a + b' calc.py",
                "--image",
                TAG,
                "--name",
                "checked",
                code=1,
            )
            checked = records(proj / "volumes", "adhoc")["checked"]
            assert (checked["status"], checked["class"], checked["check_exit"]) == (
                "failed",
                "verifier",
                1,
            )

            fb("run", ".", "-f", "flows.py:main", *scenario, "--persistent", "--name", "kept")
            woke = fb("wake", "kept")
            assert "kept: passed" in woke.stderr
            kept = records(proj / "volumes", "adhoc")["kept"]
            assert kept["status"] == "passed" and kept["spec"]["persistent"] is True

            matrix = fb("matrix", "jobs.toml", "-j", "2", "--image", TAG)
            assert "4/4 passed" in matrix.stdout + matrix.stderr
            batch = proj.name
            batches.append(batch)
            assert {j: r["status"] for j, r in records(proj / "volumes", batch).items()} == {
                "notes.main.r1": "passed",
                "notes.main.r2": "passed",
                "notes.careful.r1": "passed",
                "notes.careful.r2": "passed",
            }
            again = fb("matrix", "jobs.toml", "-j", "2", "--image", TAG)  # the home grew: nothing re-runs
            assert "4 kept, 0 to run" in again.stderr

            report = fb("report", batch)
            assert (proj / "volumes" / batch / "report" / "report.html").is_file(), report.stdout

            assert {p.name for p in proj.iterdir()} == USER_FILES | INIT_FILES | {"volumes"}
            assert {p.name for p in (proj / "scenarios").iterdir()} == {"offline.toml"}
            assert not list(Path(str(tool)).resolve().parent.parent.rglob(".cache"))
    finally:  # this home's orchestrators' containers only: other tests run adhoc jobs too
        left = [leftovers(proj / "volumes", b) for b in batches]
    assert not any(left), [r.describe() for r in left if r]
