"""What running a task in its own image costs, measured in one run of this script (issue 33).

The same one-step job (bench/pingjob.py: one CLI start, one model turn, scripted model):

  runtime    `flower-batch run` in flower-batch's runtime image
  foreign    the same in Debian 13 (an image flower-batch did not build), flower brought in from
             the runtime bundle's volume (running/bundle.py); the image's probe remembered
  new image  the same in an image never seen before (a fresh id: its probe runs once)

Printed: time to the first model request of each and their ratio (goal: foreign / runtime at most
1.10x), what the first job of a new image costs beyond its container (goal: at most 2 s; nothing
is installed per job, where Harbor's published per-trial install took 253 s pre-baked and 625 to
1,043 s cold), and the other design weighed: the bundle layered onto each task image (`docker
build FROM task` + `COPY --from=runtime /opt/flower`), a cost every new task image would pay.
Then a matrix of 3 tasks x 2 variants over 3 images (runtime, Debian 13, Debian 11) against the
same matrix in one image, builds excluded (goal: at most 1.10x). Nothing is asserted.

    .venv/bin/python bench/task_image.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.pingjob import FLOW, SCENARIO  # noqa: E402
from flower_batch.running.image import build_image  # noqa: E402
from tests.batch_fixtures.task_images import DEBIAN11, DEBIAN13, ensure  # noqa: E402

FB = ROOT / ".venv" / "bin" / "flower-batch"
MATRIX = """
[batch]
name = "{name}"

[defaults]
workspace = "ws"
workflow = "bench_flow:main"
gateway = {{ mode = "scripted", scenario = "bench.toml" }}

[tasks.a]
prompt = "a"
image = "{a}"

[tasks.b]
prompt = "b"
image = "{b}"

[tasks.c]
prompt = "c"
image = "{c}"

[matrix]
variant = [{{ name = "x" }}, {{ name = "y", args = {{ v = "y" }} }}]
"""


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise SystemExit(
            f"bench: {' '.join(map(str, cmd[:4]))} ... exited {proc.returncode}:\n{proc.stderr[-2000:]}"
        )
    return proc


def first_request(log: Path, t0: float) -> float:
    for line in log.read_text().splitlines():
        record = json.loads(line)
        if record.get("endpoint") == "messages":
            return float(record["time"]) - t0
    raise SystemExit(f"bench: no model request in {log}")


def one_job(tmp: Path, home: Path, image: str, name: str) -> tuple[float, float]:
    """(seconds to the first model request, seconds in all) of `flower-batch run` in `image`."""
    started, t0 = time.time(), time.monotonic()
    run(
        [str(FB), "run", str(tmp / "ws"), "-f", f"{tmp / 'bench_flow.py'}:main", "--scenario",
         str(tmp / "bench.toml"), "--name", name, "--image", image, "--home", str(home)],
    )  # fmt: skip
    total = time.monotonic() - t0
    return first_request(home / "adhoc" / name / "logs" / "gateway.jsonl", started), total


def fresh_image(base: str) -> str:
    """A new image id on `base` (one label): an image this home has never probed."""
    tag = f"flower-batch-bench:{uuid.uuid4().hex[:12]}"
    dockerfile = f"FROM {base}\nLABEL bench.nonce={uuid.uuid4().hex}\n"
    subprocess.run(
        ["docker", "build", "-q", "-t", tag, "-"],
        input=dockerfile,
        text=True,
        check=True,
        capture_output=True,
    )
    return tag


def layered(task: str, runtime: str) -> tuple[float, int]:
    """The other design: the bundle copied onto the task image, once per (task, runtime) pair."""
    tag = f"flower-batch-bench:layered-{uuid.uuid4().hex[:12]}"
    dockerfile = f"FROM {runtime} AS rt\nFROM {task}\nCOPY --from=rt /opt/flower /opt/flower\n"
    t0 = time.monotonic()
    subprocess.run(
        ["docker", "build", "-q", "-t", tag, "-"],
        input=dockerfile,
        text=True,
        check=True,
        capture_output=True,
    )
    seconds = time.monotonic() - t0
    size = int(run(["docker", "image", "inspect", "--format", "{{.Size}}", tag]).stdout.strip())
    base = int(run(["docker", "image", "inspect", "--format", "{{.Size}}", task]).stdout.strip())
    run(["docker", "rmi", "-f", tag])
    return seconds, size - base


def matrix(tmp: Path, home: Path, name: str, images: tuple[str, str, str]) -> float:
    (tmp / f"{name}.toml").write_text(MATRIX.format(name=name, a=images[0], b=images[1], c=images[2]))
    t0 = time.monotonic()
    run([str(FB), "matrix", str(tmp / f"{name}.toml"), "-j", "3", "--fresh", "--home", str(home)])
    return time.monotonic() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each kind (median reported)")
    args = parser.parse_args()
    runtime = build_image(log=lambda line: None)
    for tag in (DEBIAN11, DEBIAN13):
        ensure(tag)
    tmp = Path(tempfile.mkdtemp(prefix="fb-task-image-"))
    made: list[str] = []
    try:
        (tmp / "ws").mkdir()
        (tmp / "ws" / "README").write_text("bench\n")
        (tmp / "bench_flow.py").write_text(FLOW)
        (tmp / "bench.toml").write_text(SCENARIO)
        home = tmp / "home"
        one_job(tmp, home, DEBIAN13, "warm")  # the bundle's volume and Debian 13's probe, once
        in_runtime, in_foreign, new_first, new_total, cached_total = [], [], [], [], []
        for i in range(args.repeat):
            first, _ = one_job(tmp, home, runtime.id, f"rt{i}")
            in_runtime.append(first)
            first, total = one_job(tmp, home, DEBIAN13, f"fo{i}")
            in_foreign.append(first)
            cached_total.append(total)
            image = fresh_image(DEBIAN13)
            made.append(image)
            first, total = one_job(tmp, home, image, f"new{i}")
            new_first.append(first)
            new_total.append(total)
        layer_s, layer_bytes = layered(DEBIAN13, runtime.id)
        one = [matrix(tmp, home, f"one{i}", (runtime.id,) * 3) for i in range(args.repeat)]
        three = [matrix(tmp, home, f"three{i}", (runtime.id, DEBIAN13, DEBIAN11)) for i in range(args.repeat)]
    finally:
        for image in made:
            subprocess.run(["docker", "rmi", "-f", image], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)

    med = statistics.median
    rt, fo = med(in_runtime), med(in_foreign)
    print(
        f"task images, median of {args.repeat} (runtime {runtime.id[:19]}, scripted model, {os.cpu_count()} cpus)"
    )
    print(f"  to first model request: runtime image {rt:5.2f} s, Debian 13 {fo:5.2f} s")
    print(f"  ratio foreign / runtime image to first request   {fo / rt:5.2f}x   (goal <= 1.10x)")
    extra = med(new_total) - med(cached_total)
    print(
        f"  first job of a new image: {med(new_total):5.2f} s in all, {med(new_first):5.2f} s to first request; "
        f"+{extra:.2f} s over a known image (its probe)   (goal <= 2 s)"
    )
    print(
        f"  the other design, the bundle layered onto each task image: {layer_s:5.1f} s and "
        f"{layer_bytes / 1e6:.0f} MB per new image (the volume: 0 s, 0 MB)"
    )
    print(f"  matrix 3 tasks x 2 variants: one image {med(one):5.1f} s, three images {med(three):5.1f} s")
    print(
        f"  ratio three images / one image                   {med(three) / med(one):5.2f}x   (goal <= 1.10x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
