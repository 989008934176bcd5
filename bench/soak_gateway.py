"""Soak of the gateway alone (issue 10, 5a): memory, bytes logged and latency added, one run.

The real `python -m flower_batch.gateway.server serve` runs as a subprocess (its RSS read from /proc),
in each mode:

  scripted   the gateway plays the scenario itself;
  anthropic  the gateway proxies to a local upstream: the scripted server run directly
             (`python -m flower.scripted serve`), with a fake upstream key.

Workloads, each against a fresh batch folder, the way the CLI talks (every request resends the
whole history, `cache_control` on its last block, streamed answers, keep-alive connections):

  long       one conversation of --requests requests, from --start bytes growing --growth bytes
             a request (default 2,000 requests, 20 KB + 2 KB each: ~4 MB at the end);
  parallel   --jobs conversations (one job each) of --parallel-requests requests, all at once;
  latency    --latency-requests requests with bodies centred on --latency-body (1 MB), each body
             sent through the gateway and straight to a scripted server (the upstream itself in
             proxy mode; in scripted mode a scripted server run directly with the same scenario),
             in alternating order (A B B A ...) so that load changes hit both: the latency the
             gateway adds, with the machine's load average before and after.

Printed, with the targets and PASS/FAIL: the gateway's RSS at checkpoints (and its peak,
VmHWM), the request log's bytes per request against the size of the request's new messages,
the recording's and meter's bytes per request (they must not grow with the body), and the
added latency p50/p99. Exits 1 when a target is missed.

    .venv/bin/python bench/soak_gateway.py            # full size (takes minutes)
    .venv/bin/python bench/soak_gateway.py --quick    # small sizes, seconds
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flower_batch.gateway.tokens import SECRET_ENV, job_token  # noqa: E402

MIB = 1024 * 1024
MB = 1_000_000  # the "1 MB bodies"
TARGET_RSS_MIB = 100.0
TARGET_LOG_OVERHEAD = 2048  # bytes a request's log entry may take beyond its new messages
TARGET_P50_MS = 5.0
TARGET_P99_MS = 20.0
SCENARIO = """
[defaults]
usage = { input_tokens = 1200, output_tokens = 40, cache_read_input_tokens = 90000 }

[[rules]]
name = "answer"
reply = [{ text = "Done: the step is finished." }]
"""
SECRET = "soak-" + "0" * 59


# -- processes --------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A server subprocess; `url` once it said it listens."""

    def __init__(self, argv: list[str], env: dict[str, str], ready: str, url: str | None = None) -> None:
        self.proc = subprocess.Popen(
            argv,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise SystemExit(f"soak: {argv[2]} did not start: {err.strip()[-300:]}")
            if ready in line:
                self.url = url or line.strip()
                return
        raise SystemExit(f"soak: {argv[2]} did not start within 60 s")

    def rss_mib(self) -> tuple[float, float]:
        """(VmRSS, VmHWM) in MiB: now, and the peak so far."""
        fields = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0]) / 1024
        return fields["VmRSS"], fields["VmHWM"]

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the process used so far: a figure the machine's load does
        not inflate, unlike the latencies."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def scripted_server(scenario: Path) -> Server:
    return Server([sys.executable, "-m", "flower.scripted", "serve", str(scenario)], {}, "http://")


def gateway(mode: str, batch: Path, scenario: Path, upstream: str | None) -> Server:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "flower_batch.gateway.server",
        "serve",
        "--mode",
        mode,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--batch-dir",
        str(batch),
    ]
    env = {SECRET_ENV: SECRET}
    if mode == "scripted":
        argv += ["--scenario", str(scenario)]
    else:
        argv += ["--upstream", str(upstream)]
        env["FB_UPSTREAM_KEY"] = "sk-soak-not-a-real-key"
    return Server(argv, env, "gateway listening", url=f"http://127.0.0.1:{port}")


# -- the client: a conversation the way the CLI sends it --------------------------------------------
def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Conversation:
    """Successive request bodies of one conversation: the whole history each time."""

    def prefill(self, size: int) -> None:
        """Grow the history without sending it, to about `size` bytes of body (many messages,
        the way a long conversation reaches it)."""
        while len(self.next_body()[0]) < size:
            pass

    def __init__(self, session: str, start: int, growth: int) -> None:
        self.session = session
        self.growth = growth
        system = [
            {
                "type": "text",
                "text": "You are the agent of a long-horizon workflow. " * 80,
                "cache_control": {"type": "ephemeral"},
            }
        ]
        tools = [
            {
                "name": f"Tool{i}",
                "description": "A tool the agent may call. " * 12,
                "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}},
            }
            for i in range(12)
        ]
        self.head = (
            '{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,'
            f'"metadata":{{"user_id":{_compact(json.dumps({"session_id": session}))}}},'
            f'"system":{_compact(system)},"tools":{_compact(tools)},"messages":['
        )
        pad = max(100, start - len(self.head) - 200)
        self.messages: list[dict] = [
            {"role": "user", "content": [{"type": "text", "text": "Begin. " + "p" * pad}]}
        ]
        self.parts = [_compact(self.messages[0])]
        self.n = 0

    def next_body(self) -> tuple[bytes, int]:
        """The next request's body, and the size of the messages new in it (all of it, first)."""
        self.n += 1
        if self.n > 1:
            half = max(50, self.growth // 2 - 120)
            tool_id = f"toolu_{self.session[-6:]}_{self.n:05d}"
            new = [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": f"Step {self.n}: " + "a" * (half - 80)},
                        {"type": "tool_use", "id": tool_id, "name": "Tool1", "input": {"arg": "go"}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": tool_id,
                            "content": f"output {self.n} " + "o" * half,
                        }
                    ],
                },
            ]
            self.parts += [_compact(m) for m in new]
            self.messages += new
        last = json.loads(self.parts[-1])
        last["content"][-1]["cache_control"] = {"type": "ephemeral"}
        body = (self.head + ",".join([*self.parts[:-1], _compact(last)]) + "]}").encode()
        new_bytes = len(body) if self.n == 1 else len(self.parts[-2]) + len(self.parts[-1]) + 2
        return body, new_bytes


class Client:
    """One keep-alive connection sending one job's requests."""

    def __init__(self, url: str, job: str | None) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=120)
        self.path = (f"/j/{job}" if job else "") + "/v1/messages?beta=true"
        self.key = job_token(SECRET, job) if job else "scripted-model"

    def send(self, body: bytes, session: str) -> float:
        """Seconds from sending the request to the end of the streamed answer."""
        headers = {
            "content-type": "application/json",
            "x-api-key": self.key,
            "anthropic-version": "2023-06-01",
            "x-claude-code-session-id": session,
            "user-agent": "claude-cli/2.0.0 (external, soak)",
        }
        t0 = time.perf_counter()
        self.conn.request("POST", self.path, body=body, headers=headers)
        resp = self.conn.getresponse()
        data = resp.read()
        took = time.perf_counter() - t0
        if resp.status != 200 or b"message_stop" not in data:
            raise SystemExit(f"soak: request failed: {resp.status} {data[:300]!r}")
        return took

    def close(self) -> None:
        self.conn.close()


# -- measuring ------------------------------------------------------------------------------------
@dataclass
class Results:
    lines: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def check(self, label: str, value: float, target: float, unit: str, extra: str = "") -> None:
        ok = value <= target
        self.lines.append(
            f"  {label:<46} {value:>10.2f} {unit:<4} target <= {target:g} {unit:<4} "
            f"{'PASS' if ok else 'FAIL'}{'  ' + extra if extra else ''}"
        )
        if not ok:
            self.failed.append(label)

    def info(self, text: str) -> None:
        self.lines.append(f"  {text}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def line_sizes(path: Path) -> list[tuple[dict, int]]:
    """Each JSON line of a file with its size in bytes (newline included)."""
    with path.open("rb") as lines:
        return [(json.loads(raw), len(raw)) for raw in lines]


def per_request_bytes(logs: Path, requests: int) -> dict[str, list[int]]:
    """Bytes each request added to each file of the job, read from the files' own lines (the
    request log is written after the answer: file sizes seen by the client would race)."""
    out: dict[str, list[int]] = {}
    out["gateway.jsonl"] = [size for _, size in line_sizes(logs / "gateway.jsonl")]
    out["recording.jsonl"] = [size for _, size in line_sizes(logs / "recording.jsonl")]
    meter: dict[str, int] = {}
    for line, size in line_sizes(logs / "meter.jsonl"):
        meter[str(line.get("ex"))] = meter.get(str(line.get("ex")), 0) + size
    out["meter.jsonl"] = list(meter.values())
    for name, sizes in out.items():
        if len(sizes) != requests:
            raise SystemExit(f"soak: {name} has {len(sizes)} entries for {requests} requests")
    return out


def run_long(gw: Server, batch: Path, args: argparse.Namespace, res: Results, mode: str) -> None:
    job = "long-job"
    logs = batch / job / "logs"
    convo = Conversation("sess-long-0001", args.start, args.growth)
    if args.prefill:  # start the conversation already long (not sent): the last stretch of a long job
        convo.prefill(args.prefill)
    client = Client(gw.url, job)
    checkpoints = {max(1, round(args.requests * k / 8)) for k in range(1, 9)}
    new_bytes: list[int] = []
    rss_seen: list[tuple[int, int, float, float]] = []
    t0 = time.monotonic()
    body = b""
    sent = 0
    for n in range(1, args.requests + 1):
        body, new = convo.next_body()
        new_bytes.append(len(body) if n == 1 else new)  # the first request sent is new all through
        sent += len(body)
        client.send(body, convo.session)
        if n in checkpoints:
            rss, hwm = gw.rss_mib()
            rss_seen.append((n, len(body), rss, hwm))
    took = time.monotonic() - t0
    client.close()
    gw.stop()  # the request log is complete once the gateway stopped
    begun = (
        f"prefilled (not sent) to {args.prefill / MIB:.1f} MiB"
        if args.prefill
        else f"{args.start // 1024} KB"
    )
    res.info(
        f"[{mode}] long: {args.requests} requests, one conversation, {begun} + "
        f"{args.growth / 1024:g} KB a request -> {len(body) / MIB:.2f} MiB last body "
        f"({len(convo.messages)} messages), {took:.0f} s"
    )
    for n, size, rss, hwm in rss_seen:
        res.check(
            f"gateway RSS after {n} requests ({size / MIB:.2f} MiB body)",
            rss,
            TARGET_RSS_MIB,
            "MiB",
            f"peak so far {hwm:.1f} MiB",
        )
    res.check("gateway RSS peak (VmHWM) over the long run", rss_seen[-1][3], TARGET_RSS_MIB, "MiB")
    grown = per_request_bytes(logs, args.requests)
    overhead = [logged - new for logged, new in zip(grown["gateway.jsonl"], new_bytes, strict=True)]
    total_log = sum(grown["gateway.jsonl"])
    res.check(
        "request log: worst bytes/request beyond new msgs",
        max(overhead),
        TARGET_LOG_OVERHEAD,
        "B",
        f"median {statistics.median(overhead):.0f} B; gateway.jsonl {total_log / MIB:.1f} MiB for "
        f"{sent / MIB:.0f} MiB of request bodies",
    )
    for name in ("recording.jsonl", "meter.jsonl"):
        sizes = grown[name]
        tenth = max(1, len(sizes) // 10)
        first, last = statistics.mean(sizes[:tenth]), statistics.mean(sizes[-tenth:])
        res.check(
            f"{name}: bytes/request, last tenth / first tenth",
            last / first,
            1.5,
            "x",
            f"{first:.0f} -> {last:.0f} B/request",
        )
    # the first request holds everything so far: the per-request figure is of the rest
    grown = {name: sizes[1:] for name, sizes in grown.items()} if args.prefill else grown
    per_request = sum(sum(sizes) for sizes in grown.values()) / max(
        1, args.requests - (1 if args.prefill else 0)
    )
    new_mean = statistics.mean(new_bytes[1:] if args.prefill and len(new_bytes) > 1 else new_bytes)
    res.info(
        f"[{mode}] on disk: {per_request:.0f} B a request in all (gateway.jsonl + recording.jsonl + "
        f"meter.jsonl) beyond its new messages: {per_request - new_mean:.0f} B"
    )


def run_parallel(gw: Server, batch: Path, args: argparse.Namespace, res: Results, mode: str) -> None:
    peak = [0.0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.2):
            peak[0] = max(peak[0], gw.rss_mib()[0])

    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            convo = Conversation(f"sess-par-{i:04d}", args.start, args.growth)
            client = Client(gw.url, f"par-job-{i:02d}")
            for _ in range(args.parallel_requests):
                body, _ = convo.next_body()
                client.send(body, convo.session)
            client.close()
        except BaseException as exc:  # reported below: a failed conversation fails the bench
            errors.append(exc)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0 = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(args.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    watcher.join()
    if errors:
        raise SystemExit(f"soak: a parallel conversation failed: {errors[0]}")
    took = time.monotonic() - t0
    rss, hwm = gw.rss_mib()
    gw.stop()
    logged = sum(
        (batch / f"par-job-{i:02d}" / "logs" / "gateway.jsonl").stat().st_size for i in range(args.jobs)
    )
    res.info(
        f"[{mode}] parallel: {args.jobs} conversations x {args.parallel_requests} requests at once, {took:.0f} s, "
        f"{logged / MIB:.1f} MiB of request logs"
    )
    res.check("gateway RSS, sampled max during the parallel run", peak[0], TARGET_RSS_MIB, "MiB")
    res.check("gateway RSS after the parallel run", rss, TARGET_RSS_MIB, "MiB", f"peak (VmHWM) {hwm:.1f} MiB")


def run_latency(gw: Server, direct: Server, args: argparse.Namespace, res: Results, mode: str) -> None:
    convo = Conversation("sess-lat-0001", args.start, args.growth)
    # The bodies grow as the conversation does: start below the size measured at, so that the
    # requests' bodies are centred on it (the target is "at 1 MB bodies").
    convo.prefill(max(args.start, args.latency_body - (args.latency_requests + 3) * args.growth // 2))
    load_before = os.getloadavg()[0]
    via, straight = Client(gw.url, "latency-job"), Client(direct.url, None)
    for _ in range(3):  # warm both paths (imports, first connection)
        body, _ = convo.next_body()
        via.send(body, convo.session)
        straight.send(body, convo.session)
    through: list[float] = []
    plain: list[float] = []
    sizes: list[int] = []
    cpu_gw, cpu_direct = gw.cpu_s(), direct.cpu_s()
    for i in range(args.latency_requests):
        body, _ = convo.next_body()
        sizes.append(len(body))
        pair = [(via, through), (straight, plain)]
        for client, out in pair if i % 2 == 0 else reversed(pair):  # alternate: load drift hits both
            time.sleep(args.gap)  # the CLI's own time between an answer and its next request
            out.append(client.send(body, convo.session))
    via.close()
    straight.close()
    time.sleep(0.3)  # the gateway's last log line
    cpu_gw, cpu_direct = gw.cpu_s() - cpu_gw, direct.cpu_s() - cpu_direct
    served_direct = args.latency_requests * (2 if mode == "anthropic" else 1)  # upstream: both ways
    p50 = (statistics.median(through) - statistics.median(plain)) * 1000
    p99 = (percentile(through, 0.99) - percentile(plain, 0.99)) * 1000
    paired = [(v - d) * 1000 for v, d in zip(through, plain, strict=True)]  # same body, back to back
    res.info(
        f"[{mode}] latency: {args.latency_requests} requests each way, the same bodies both ways, "
        f"interleaved (gateway, direct, direct, gateway, ...), {args.gap * 1000:.0f} ms apart; bodies "
        f"{min(sizes) / 1e6:.3f}-{max(sizes) / 1e6:.3f} MB (median {statistics.median(sizes) / 1e6:.3f} MB, "
        f"{len(convo.messages)} messages at the end); load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores"
    )
    res.info(
        f"[{mode}] latency: direct "
        f"p50 {statistics.median(plain) * 1000:.1f} ms p99 {percentile(plain, 0.99) * 1000:.1f} ms, "
        f"via the gateway p50 {statistics.median(through) * 1000:.1f} ms p99 {percentile(through, 0.99) * 1000:.1f} ms"
    )
    res.info(
        f"[{mode}] CPU per request: gateway {cpu_gw / args.latency_requests * 1000:.1f} ms (its log "
        f"written after the answer included), scripted server {cpu_direct / served_direct * 1000:.1f} ms; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    res.info(
        f"[{mode}] latency: per pair (via - direct, same body) median {statistics.median(paired):.2f} ms, "
        f"p99 {percentile(paired, 0.99):.2f} ms"
    )
    res.check("latency added by the gateway, p50", p50, TARGET_P50_MS, "ms", "p50 via - p50 direct")
    res.check("latency added by the gateway, p99", p99, TARGET_P99_MS, "ms", "p99 via - p99 direct")


def soak_mode(mode: str, tmp: Path, scenario: Path, args: argparse.Namespace, res: Results) -> None:
    direct = scripted_server(scenario)  # the upstream in proxy mode; the baseline in both
    try:
        for workload in ("long", "parallel", "latency"):
            if workload not in args.only:
                continue
            batch = tmp / f"{mode}-{workload}"
            batch.mkdir()
            gw = gateway(mode, batch, scenario, direct.url)
            try:
                if workload == "long":
                    run_long(gw, batch, args, res, mode)
                elif workload == "parallel":
                    run_parallel(gw, batch, args, res, mode)
                else:
                    run_latency(gw, direct, args, res, mode)
            finally:
                gw.stop()
    finally:
        direct.stop()


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="soak_gateway", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes: a fast check that the bench runs")
    p.add_argument("--modes", default="scripted,anthropic", help="comma-separated: scripted, anthropic")
    p.add_argument("--only", default="long,parallel,latency", help="comma-separated workloads")
    p.add_argument("--requests", type=int, help="long: requests of the one conversation (2000)")
    p.add_argument("--start", type=int, help="bytes of the first body (20480)")
    p.add_argument(
        "--prefill",
        type=int,
        default=0,
        help="long: grow the conversation to this many bytes before the first request is sent",
    )
    p.add_argument("--growth", type=int, help="bytes added a request (2048)")
    p.add_argument("--jobs", type=int, help="parallel: conversations at once (16)")
    p.add_argument("--parallel-requests", type=int, help="parallel: requests each (300)")
    p.add_argument(
        "--latency-body", type=int, help="latency: bytes the bodies are centred on (1 MB: 1,000,000)"
    )
    p.add_argument("--latency-requests", type=int, help="latency: requests each way (200)")
    p.add_argument(
        "--gap",
        type=float,
        default=0.05,
        help="latency: seconds between an answer and the next request (the CLI's own time; 0.05)",
    )
    args = p.parse_args(argv)
    full = dict(
        requests=2000,
        start=20 * 1024,
        growth=2048,
        jobs=16,
        parallel_requests=300,
        latency_body=MB,
        latency_requests=200,
    )
    quick = dict(
        requests=60,
        start=20 * 1024,
        growth=2048,
        jobs=4,
        parallel_requests=20,
        latency_body=MB,
        latency_requests=40,
    )
    for name, value in (quick if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.only = set(args.only.split(","))
    args.modes = [m for m in args.modes.split(",") if m]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    res = Results()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fb-soak-") as name:
        tmp = Path(name)
        (tmp / "soak.toml").write_text(SCENARIO)
        for mode in args.modes:
            (tmp / mode).mkdir()
            soak_mode(mode, tmp / mode, tmp / "soak.toml", args, res)
            print("\n".join(res.lines), flush=True)
            res.lines.clear()
    print(
        f"soak: {time.monotonic() - t0:.0f} s in all; "
        + ("all targets met" if not res.failed else f"{len(res.failed)} missed: {', '.join(res.failed)}")
    )
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
