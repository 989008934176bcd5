"""What a task's own image costs on a swarm, once per new task image (issue 33), measured on the
test cluster: the runtime layered onto an image the cluster has never seen (running/layered.py),
phase by phase, then one worker's first pull of the layered digest.

  bare probe   the image's architecture, /bin/sh and glibc loader, before anything is layered
  layer        `FROM <task id>` + `COPY --from=<runtime id> /opt/flower`, built on the manager
  probe        flower's Python and the CLI started in the layered image
  push         the layered image to the cluster's registry
  first pull   a worker pulls the layered digest (what its first job of that image waits for)

The task image is Debian 13 (tests/batch_fixtures/task_images.py) with a fresh label, so its id
is new and nothing is cached; it, its layered copy and the worker's copy are removed at the end
(the registry keeps its tag). Nothing is asserted.

    FLOWER_BATCH_CLUSTER_ENV=images/.cache/cluster-fbsw.env .venv/bin/python bench/swarm_layer.py RUNTIME
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flower_batch.backend.docker.images import DockerImages  # noqa: E402
from flower_batch.backend.docker.registry import TASK_REPOSITORY, push_image  # noqa: E402
from flower_batch.jobmodel.environment import TaskImage  # noqa: E402
from flower_batch.running.bundle import probe, probe_without_flower  # noqa: E402
from flower_batch.running.image import read_image  # noqa: E402
from flower_batch.running.layered import layer_runtime_onto  # noqa: E402
from tests.batch_fixtures.task_images import DEBIAN13  # noqa: E402

ENV_FILE = Path(os.environ.get("FLOWER_BATCH_CLUSTER_ENV") or ROOT / "images" / ".cache" / "cluster.env")


def cluster_env() -> dict[str, str]:
    if not ENV_FILE.exists():
        sys.exit(
            f"bench/swarm_layer.py: no test cluster ({ENV_FILE} is missing): run make cluster-up cluster-push"
        )
    env = {}
    for line in ENV_FILE.read_text().splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = shlex.split(value)[0] if value else ""
    return env


def main() -> int:
    if len(sys.argv) != 2:
        sys.exit("usage: bench/swarm_layer.py RUNTIME (the runtime image pushed to the cluster: its id)")
    env = cluster_env()
    manager, registry = env["DOCKER_HOST"], env["FLOWER_BATCH_REGISTRY"]
    prefix = registry.split("-registry")[0]
    images = DockerImages(manager, timeout=1800)
    runtime = read_image(sys.argv[1], manager).pinned  # as pushed: a tag or id the manager knows
    made: list[str] = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / "Dockerfile").write_text(
                f"FROM {DEBIAN13}\nLABEL bench.swarm-layer={uuid.uuid4()}\n"
            )
            task_id = images.build(Path(folder), None, {}, {})
        made.append(task_id)
        task = TaskImage(task_id, "image", "bench")
        timed: dict[str, float] = {}
        began = time.monotonic()
        probe_without_flower(images, task_id, "bench")
        timed["bare probe"] = time.monotonic() - began
        began = time.monotonic()
        layered = layer_runtime_onto(images, task, runtime, lambda line: None)
        made.insert(0, layered)
        timed["layer"] = time.monotonic() - began
        began = time.monotonic()
        with tempfile.TemporaryDirectory() as cache:
            probe(images, layered, None, Path(cache) / "probed.json", "bench")
        timed["probe"] = time.monotonic() - began
        began = time.monotonic()
        reference = push_image(layered, registry, manager, repository=TASK_REPOSITORY).reference
        timed["push"] = time.monotonic() - began
        began = time.monotonic()
        node = f"{prefix}-worker1"
        host = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}  # the nodes are its containers
        pull = ["docker", "exec", node, "docker", "pull", "-q", reference]
        subprocess.run(pull, check=True, capture_output=True, env=host)
        timed["first pull"] = time.monotonic() - began
        subprocess.run(["docker", "exec", node, "docker", "rmi", reference], capture_output=True, env=host)
        size = images.find(layered)
        for name, seconds in timed.items():
            print(f"{name:<11} {seconds:6.1f} s")
        print(
            f"total       {sum(timed.values()):6.1f} s  (layered image {size.size_bytes / 1e6:.0f} MB)"
            if size
            else ""
        )
    finally:
        for image_id in made:
            images.remove(image_id)
        images.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
