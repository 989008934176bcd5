"""How fast a huge matrix is refused, counted, expanded and summarised (issue 11), in-process.

A jobs.toml of N jobs (default 200,000: axes of 100 × 100 × 20, starter flow):

1. refusal: `load_jobs_file(max_jobs=10_000)` raising MatrixTooLarge (what `matrix` and
   `matrix --dry-run` do without --allow-large) — counted, never expanded;
2. expansion: `load_jobs_file()` (what --allow-large does);
3. plan: `plan_resume` over the jobs with no records;
4. summary: `plan_lines` (what --dry-run prints past a screenful), and how many lines it is;
5. with --command: the real `flower-batch matrix --dry-run` without and with --allow-large
   (needs Docker and the runtime image: --image).

    .venv/bin/python bench/huge_matrix.py [--sizes 100 100 20] [--command --image flower-batch-runtime:latest]

Prints one JSON document (seconds per phase, from one run) on stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flower_batch.commands.plan_summary import plan_lines  # noqa: E402
from flower_batch.errors import MatrixTooLarge  # noqa: E402
from flower_batch.jobmodel.resume import plan_resume  # noqa: E402
from flower_batch.jobsfile import MAX_JOBS, load_jobs_file  # noqa: E402


def jobs_file(folder: Path, sizes: list[int]) -> Path:
    (folder / "ws").mkdir()
    axes = "\n".join(f"{chr(ord('a') + i)} = [{', '.join(map(str, range(n)))}]" for i, n in enumerate(sizes))
    path = folder / "jobs.toml"
    (folder / "s.toml").write_text('[[rules]]\nreply = "done"\n')
    path.write_text(
        f'[tasks.t]\nprompt = "do ${{{{ matrix.a }}}}"\nworkspace = "ws"\n'
        f'gateway = {{ mode = "scripted", scenario = "s.toml" }}\n[matrix]\n{axes}\n'
    )
    return path


def command(path: Path, image: str, *flags: str) -> tuple[float, int, int]:
    """(seconds, exit code, stdout lines) of one real `matrix --dry-run` on an empty home."""
    home = path.parent / "home"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "flower-batch"),
            "matrix",
            str(path),
            "--dry-run",
            "--image",
            image,
            "--home",
            str(home),
            *flags,
        ],
        capture_output=True,
        text=True,
    )
    took = time.perf_counter() - t0
    assert not home.exists(), "a dry run wrote into the home"
    return round(took, 3), proc.returncode, len(proc.stdout.splitlines())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 100, 20])
    parser.add_argument("--command", action="store_true", help="also time the real command (Docker)")
    parser.add_argument("--image", default="flower-batch-runtime:latest")
    args = parser.parse_args()
    figures: dict[str, object] = {"jobs": math.prod(args.sizes), "limit": MAX_JOBS}
    with tempfile.TemporaryDirectory() as tmp:
        path = jobs_file(Path(tmp), args.sizes)
        t0 = time.perf_counter()
        try:
            load_jobs_file(path, max_jobs=MAX_JOBS)
            figures["refused"] = False
        except MatrixTooLarge:
            figures["refused"] = True
        figures["refusal_s"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        jf = load_jobs_file(path)
        figures["expansion_s"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        plan = plan_resume(jf.jobs, "sha256:" + "0" * 64, {})
        figures["plan_s"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        lines = plan_lines(plan, jf.jobs, limit=40)
        figures["summary_s"] = round(time.perf_counter() - t0, 3)
        figures["summary_lines"] = len(lines)
        if args.command:
            for key, flags in (("command_refused", ()), ("command_allow_large", ("--allow-large",))):
                seconds, code, out_lines = command(path, args.image, *flags)
                figures[key] = {"s": seconds, "exit": code, "stdout_lines": out_lines}
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
