"""The gateway's CPU per request as the number of jobs at once grows: 8, 64 and 256 jobs, each
sending its requests through its own unix socket, as a batch's jobs do on one machine.

Each job sends the same number of requests, so a growing CPU per request is what more jobs at
once cost, not a per-job cost spread over fewer requests. The gateway runs here as a host process (the same module the sidecar runs), in scripted mode,
so its CPU is this process's child's (/proc/<pid>/stat). Printed, measured in this one run: the
CPU per request at each concurrency and the ratio of the highest to the lowest (flat: 1.0).

    .venv/bin/python bench/gateway_cpu.py [--per-job 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.pingjob import SCENARIO  # noqa: E402
from flower.runtime.model_socket import connect_unix  # noqa: E402
from flower_batch.gateway.job_sockets import SOCKET, ask  # noqa: E402
from flower_batch.gateway.tokens import SECRET_ENV, job_token  # noqa: E402

SECRET = "bench-secret"
BODY = json.dumps(
    {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "ping"}]}
).encode()


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ask_once(sockets: Path, job: str, key: str) -> None:
    """One request of `job` on its own socket, as the CLI sends it (a stream), read to the end."""
    head = (
        f"POST /j/{job}/v1/messages HTTP/1.1\r\nHost: gateway\r\nx-api-key: {job_token(SECRET, job)}\r\n"
        f"content-type: application/json\r\nanthropic-version: 2023-06-01\r\n"
        f"Content-Length: {len(BODY)}\r\nConnection: close\r\n\r\n"
    )
    with connect_unix(sockets / key / SOCKET) as conn:
        conn.sendall(head.encode() + BODY)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    if b"pong" not in answer:
        raise RuntimeError(f"job {job}: unexpected answer {answer[:200]!r}")


def measure(tmp: Path, jobs: int, each: int) -> tuple[float, float]:
    """(gateway CPU per request in ms, wall s): `jobs` at once, `each` requests each."""
    run = tmp / f"j{jobs}"
    batch, sockets = run / "batch", run / "sockets"
    batch.mkdir(parents=True)
    (run / "secret").write_text(SECRET)
    (run / "scenario.toml").write_text(SCENARIO)
    env = {**os.environ, f"{SECRET_ENV}_FILE": str(run / "secret"), "PYTHONPATH": str(ROOT)}
    serve = [sys.executable, "-m", "flower_batch.gateway.server", "serve", "--mode", "scripted"]
    serve += ["--scenario", str(run / "scenario.toml"), "--port", "0", "--host", "127.0.0.1"]
    serve += ["--batch-dir", str(batch), "--sockets", str(sockets)]
    gateway = subprocess.Popen(serve, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert gateway.stdout is not None
        gateway.stdout.readline()  # its ready line
        keys = {}
        for i in range(1, jobs + 1):
            (batch / f"noop.r{i}").mkdir()  # the job's folder: its log goes there
            keys[f"noop.r{i}"] = ask(sockets, f"open noop.r{i}")
        errors: list[BaseException] = []

        def job_loop(job: str) -> None:
            try:
                for _ in range(each):
                    ask_once(sockets, job, keys[job])
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=job_loop, args=(job,)) for job in keys]
        before, t0 = cpu_s(gateway.pid), time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall, used = time.monotonic() - t0, cpu_s(gateway.pid) - before
        if errors:
            raise RuntimeError(f"{len(errors)} jobs failed: {errors[0]}")
        return used / (each * jobs) * 1000, wall
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-job", type=int, default=10, help="requests each job sends, one after another")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fb-gwcpu-"))
    try:
        results = {jobs: measure(tmp, jobs, args.per_job) for jobs in (8, 64, 256)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"gateway CPU per request, each job sending {args.per_job} scripted requests in turn")
    for jobs, (ms, wall) in results.items():
        print(f"  {jobs:4d} jobs at once   {ms:6.2f} ms a request   ({wall:5.1f} s wall)")
    print(f"  ratio 256 jobs / 8 jobs  {results[256][0] / results[8][0]:6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
