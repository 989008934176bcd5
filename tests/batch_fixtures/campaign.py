"""Helpers of the bad-input campaign (issue 11): the home's fingerprint, the seeded project.

A case passes only if the home is byte-for-byte what it was (every path, every file's bytes and
mode, every empty folder), or differs exactly by the new attempt the case expects.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

SEED_JOBS = """
[batch]
name = "{name}"

[defaults]
workflow = "flows.py:solo"
prompt = "Read TASK.md and do what it asks."
timeout = "2m"
check_timeout = "30s"
gateway = {{ mode = "scripted", scenario = "scenarios/quick.toml" }}

[tasks.alpha]
workspace = "tasks/alpha"
check = "grep -qx alpha answer.txt"

[tasks.beta]
workspace = "tasks/beta"
check = "grep -qx beta answer.txt"
"""

BAD_MODULES = {
    "boom.py": 'raise RuntimeError("boom at import")\n',
    "notwf.py": "main = 42\n",
    "exits.py": "import os\nos._exit(3)\n",
}

BAD_SCENARIOS = {
    "scenarios/typo.toml": '[[rules]]\nname = "hello"\nrepyl = "hi"\n',
    "scenarios/norules.toml": 'description = "rules forgotten"\n',
}


def fingerprint(root: Path) -> dict[str, str]:
    """path -> digest of every file (bytes + mode), symlink (target) and folder under `root`."""
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        rel_dir = Path(directory).relative_to(root).as_posix()
        out[f"{rel_dir}/"] = "dir"
        for name in sorted(files):
            full = Path(directory) / name
            rel = full.relative_to(root).as_posix()
            info = full.lstat()
            if stat.S_ISLNK(info.st_mode):
                out[rel] = "link:" + os.readlink(full)
            else:
                out[rel] = hashlib.sha256(full.read_bytes()).hexdigest() + f":{stat.S_IMODE(info.st_mode):o}"
    return out


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The paths that differ (added, removed or modified), for a readable assertion message."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def problem_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def huge_jobs(name: str, sizes: tuple[int, ...]) -> str:
    """A jobs.toml whose matrix makes prod(sizes) jobs of the starter flow."""
    axes = "\n".join(
        f"{chr(ord('a') + i)} = [{', '.join(f'{n}' for n in range(size))}]" for i, size in enumerate(sizes)
    )
    return (
        f'[batch]\nname = "{name}"\n[tasks.t]\nprompt = "do ${{{{ matrix.a }}}}"\nworkspace = "tasks/alpha"\n'
        f'gateway = {{ mode = "scripted", scenario = "scenarios/quick.toml" }}\n[matrix]\n{axes}\n'
    )
