"""harbor's own ATIF validator, for the tests: harbor needs Python 3.12+, the project venv is 3.11,
so the locked `atif` dependency group (pyproject.toml, uv.lock) is installed into a venv of its
own under images/.cache/ (ignored by git), made once and remade when the lock's pins change.

`validate(paths)` runs `harbor.utils.trajectory_validator.TrajectoryValidator` on each file
there and returns {path: [errors]} ([] = valid)."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from filelock import FileLock

REPO = Path(__file__).resolve().parents[3]
VENV = REPO / "images" / ".cache" / "harbor-venv"
_CHECK = """
import json, sys
from harbor.utils.trajectory_validator import TrajectoryValidator
out = {}
for path in sys.argv[1:]:
    v = TrajectoryValidator()
    out[path] = [] if v.validate(path) else v.get_errors()
print(json.dumps(out))
"""


def _uv() -> str:
    found = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
    if not Path(found).exists():
        pytest.fail("the ATIF tests need uv (make prereqs installs it)")
    return found


def _python312() -> str:
    """A CPython 3.12+ on this machine: uv's view of it, else pyenv's installs."""
    found = subprocess.run(
        [_uv(), "python", "find", "--no-project", ">=3.12"], capture_output=True, text=True
    ).stdout.strip()
    if found:
        return found
    for candidate in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3"))):
        return candidate
    pytest.fail("harbor's validator needs Python 3.12 or newer; none found (uv python find, ~/.pyenv)")
    raise AssertionError  # unreachable: pytest.fail raises


def harbor_python() -> Path:
    """The venv's python, with the locked harbor installed."""
    requirements = subprocess.run(
        [_uv(), "export", "--frozen", "--only-group", "atif", "--no-emit-project", "--no-header", "--quiet"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "harbor==" in requirements, "the atif group of uv.lock pins no harbor"
    stamp = hashlib.sha256(requirements.encode()).hexdigest()
    python = VENV / "bin" / "python"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(VENV) + ".lock"):
        if (VENV / "stamp").is_file() and (VENV / "stamp").read_text() == stamp:
            return python
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([_uv(), "venv", "-q", "--python", _python312(), str(VENV)], check=True)
        (VENV / "requirements.txt").write_text(requirements)
        subprocess.run(
            [_uv(), "pip", "install", "-q", "--python", str(python), "-r", str(VENV / "requirements.txt")],
            check=True,
            timeout=600,
        )
        (VENV / "stamp").write_text(stamp)
    return python


def validate(paths: list[Path]) -> dict[str, list[str]]:
    proc = subprocess.run(
        [str(harbor_python()), "-c", _CHECK, *map(str, paths)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))
