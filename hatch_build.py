"""The wheel carries what `flower-batch image build` needs, so an installed tool builds its
runtime image from any folder, with no checkout (flower_batch/running/image_sources.py):

    flower_batch/image_build/Dockerfile          images/runtime/Dockerfile
    flower_batch/image_build/relocate-python.sh  images/runtime/relocate-python.sh
    flower_batch/image_build/mkrootfs.sh         images/base/mkrootfs.sh
    flower_batch/image_build/requirements.lock   uv.lock's runtime dependencies with their
                                                 hashes, exported now (`uv export`), so the image
                                                 gets exactly the versions locked with this wheel

The files stay where they are in the repository; an editable install (uv sync) reads them there.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGED = "flower_batch/image_build"
FILES = {
    "images/runtime/Dockerfile": "Dockerfile",
    "images/runtime/relocate-python.sh": "relocate-python.sh",  # the Dockerfile copies it from beside it
    "images/base/mkrootfs.sh": "mkrootfs.sh",
}
# The same command as flower_batch/running/image_sources.py's checkout export: keep them equal.
EXPORT = ["export", "--frozen", "--no-dev", "--no-emit-project", "--no-header", "--quiet"]


def _uv() -> str:
    found: str | None
    try:
        from uv import find_uv_bin  # the `uv` build requirement

        return str(find_uv_bin())
    except ImportError:
        found = shutil.which("uv")
    if found is None:
        raise RuntimeError("building the wheel needs uv (the build requirement `uv`) to export uv.lock")
    return found


class LockIntoPackage(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        root = Path(self.root)
        for source, name in FILES.items():
            build_data["force_include"][str(root / source)] = f"{PACKAGED}/{name}"
        packaged = root / PACKAGED / "requirements.lock"  # a wheel built from an sdist without uv.lock
        if not (root / "uv.lock").exists() and packaged.exists():
            return
        done = subprocess.run([_uv(), *EXPORT], cwd=root, capture_output=True, text=True, check=False)
        if done.returncode != 0 or "claude-agent-sdk==" not in done.stdout:
            raise RuntimeError(f"uv export of uv.lock failed (exit {done.returncode}): {done.stderr.strip()}")
        self._lock_dir = tempfile.mkdtemp(prefix="flower-batch-lock-")
        lock = Path(self._lock_dir) / "requirements.lock"
        lock.write_text(done.stdout, encoding="utf-8")
        build_data["force_include"][str(lock)] = f"{PACKAGED}/requirements.lock"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if getattr(self, "_lock_dir", None):
            shutil.rmtree(self._lock_dir, ignore_errors=True)
