"""What a writable root costs the engine, measured in one run of this script (issue 35): the look
the watchdog takes every 2 s (`docker inspect --size`, which walks the container's layer), the
commit that keeps a job's state when it ends, and removing that state image, for a container that
wrote a few files and for one that wrote many (files in /usr/local, as a package install does).
Nothing is asserted.

    .venv/bin/python bench/writable_root.py [--files 2000] [--mb 50]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import docker  # noqa: E402

from tests.batch_fixtures.task_images import DEBIAN13, ensure  # noqa: E402


def _timed(fn: object, repeat: int = 1) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def measure(api: docker.APIClient, files: int, mb: int) -> None:
    name = f"bench-writable-{secrets.token_hex(4)}"
    script = (
        f"mkdir -p /usr/local/share/bench && i=0; while [ $i -lt {files} ]; do echo $i > /usr/local/share/bench/f$i; "
        f"i=$((i+1)); done; head -c {mb}M /dev/zero > /usr/local/share/bench/big"
    )
    c = api.create_container(
        DEBIAN13, ["sh", "-c", script], name=name, host_config=api.create_host_config(network_mode="none")
    )
    image = None
    try:
        api.start(c)
        api.wait(c)
        url = api._url("/containers/{0}/json", c["Id"])
        look, data = _timed(lambda: api._result(api._get(url, params={"size": 1}), True), repeat=5)
        plain, _ = _timed(lambda: api.inspect_container(c), repeat=5)
        commit, done = _timed(lambda: api.commit(c, repository="bench-writable-state", tag=name))
        image = done["Id"]  # type: ignore[index]
        print(
            f"{files:>6} files + {mb} MB written (SizeRw {data['SizeRw'] / 1e6:.1f} MB): "  # type: ignore[index]
            f"inspect --size {look * 1000:.0f} ms (plain inspect {plain * 1000:.0f} ms), "
            f"commit {commit:.2f} s",
            end="",
        )
    finally:
        api.remove_container(c, force=True)
        if image:
            removed, _ = _timed(lambda: api.remove_image(image))
            print(f", remove image {removed:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--mb", type=int, default=50)
    args = parser.parse_args()
    ensure(DEBIAN13)
    api = docker.APIClient()
    measure(api, 10, 1)
    measure(api, args.files, args.mb)


if __name__ == "__main__":
    main()
