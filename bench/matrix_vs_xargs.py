"""A 64-job one-step matrix at -j 8: `flower-batch matrix` vs `xargs -P 8 docker run` of the same jobs.

Both sides run the same image, the same one-step workflow and the same scripted model; the
baseline is what a user would script by hand (no records, no gateway isolation, no checks, no
resume). Printed: wall time of each and their ratio, measured in this one run.

    .venv/bin/python bench/matrix_vs_xargs.py [--jobs 64] [--parallel 8]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.pingjob import FLOW, SCENARIO  # noqa: E402
from flower.scripted import ScriptedServer  # noqa: E402
from flower_batch.running.image import build_image  # noqa: E402


def jobs_toml(n: int) -> str:
    return f"""
[batch]
name = "bench{n}"

[defaults]
workflow = "benchflow:main"
timeout = "5m"
gateway = {{ mode = "scripted", scenario = "bench.toml" }}

[tasks.noop]
workspace = "ws"
prompt = "ping"

[matrix]
repeat = {n}
"""


def timed(cmd: list[str], **kw) -> float:
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, **kw)
    return time.monotonic() - t0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=64)
    parser.add_argument("--parallel", type=int, default=8)
    args = parser.parse_args()
    image = build_image(log=lambda line: None)
    tmp = Path(tempfile.mkdtemp(prefix="fb-bench-"))
    try:
        (tmp / "ws").mkdir()
        (tmp / "ws" / "README").write_text("bench\n")
        (tmp / "benchflow.py").write_text(FLOW)
        (tmp / "bench.toml").write_text(SCENARIO)
        (tmp / "jobs.toml").write_text(jobs_toml(args.jobs))

        fb = [str(ROOT / ".venv" / "bin" / "flower-batch")]
        orchestrated = timed(
            fb
            + [
                "matrix",
                str(tmp / "jobs.toml"),
                "-j",
                str(args.parallel),
                "--home",
                str(tmp / "home"),
                "--fresh",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "TERM": "dumb"},
        )

        # The baseline: the same jobs by hand, model on the host network.
        base = tmp / "raw"
        for i in range(1, args.jobs + 1):
            shutil.copytree(tmp / "ws", base / f"j{i}" / "workspace")
            (base / f"j{i}" / "runs").mkdir(parents=True)
        flows = tmp / "flows"
        flows.mkdir()
        shutil.copyfile(tmp / "benchflow.py", flows / "benchflow.py")
        with ScriptedServer(tmp / "bench.toml", host="0.0.0.0") as srv:
            docker_run = (
                f"docker run --rm --network host --user {os.getuid()}:{os.getgid()} "
                f"-v {base}/j{{}}/workspace:/workspace -v {base}/j{{}}/runs:/runs -v {flows}:/flows:ro "
                f"-e ANTHROPIC_BASE_URL=http://127.0.0.1:{srv.port} -e ANTHROPIC_API_KEY=bench "
                "-e CLAUDE_CONFIG_DIR=/runs/.claude -e HOME=/tmp -e PYTHONPATH=/flows "
                f"{image.id} flower -w /workspace -r /runs run benchflow:main --fresh"
            )
            seq = "\n".join(str(i) for i in range(1, args.jobs + 1)) + "\n"
            t0 = time.monotonic()
            subprocess.run(
                ["xargs", "-P", str(args.parallel), "-I{}", "sh", "-c", docker_run + " >/dev/null 2>&1"],
                input=seq,
                text=True,
                check=True,
            )
            raw = time.monotonic() - t0
        ok_raw = sum((base / f"j{i}" / "runs" / "manifest.json").exists() for i in range(1, args.jobs + 1))
        records = list((tmp / "home" / f"bench{args.jobs}").glob("*/record.json"))
        print(f"{args.jobs} one-step jobs at -j {args.parallel} (image {image.id[:19]}, scripted model)")
        print(f"  flower-batch matrix      {orchestrated:7.1f} s  ({len(records)} records)")
        print(f"  xargs -P docker run      {raw:7.1f} s  ({ok_raw} manifests)")
        print(f"  ratio matrix / raw       {orchestrated / raw:7.2f}x")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
