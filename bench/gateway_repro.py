"""Reproduction rate and metering accuracy of the gateway, measured end to end on Docker.

1. A matrix of sample jobs (3 workflows x 2 tasks x N repeats: multi-step with tools, one step,
   a judge round) runs in proxy mode (`anthropic`) against "the real API", here a scripted
   server on the host that notes what it billed per session.
2. Metering: each job's metered tokens and cost (record.json, meter.json) against what the
   upstream billed for that job's sessions, and against the CLI's own total (manifest).
3. Every job is reproduced with `flower-batch repro` (replay): identical manifests (step, ok,
   verdict, tool calls and inputs) and workspaces, and the upstream's request count before/after.

    .venv/bin/python bench/gateway_repro.py [--repeat 2] [--parallel 2]

Prints one JSON document (the figures) on stdout; progress on stderr.
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
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flower.scripted import MessagesServer, ParsedRequest, ResponsePlan, Scenario, ScriptedResponder  # noqa: E402
from flower_batch.gateway.prices import TOKEN_FIELDS, cost_usd  # noqa: E402
from flower_batch.gateway.recording import read_recording  # noqa: E402
from flower_batch.running.image import build_image  # noqa: E402

PROJECT = ROOT / "tests" / "gateway_fixtures" / "project"
FB = ROOT / ".venv" / "bin" / "flower-batch"
JOBS = """
[batch]
name = "sample"

[defaults]
workflow = "flows:${{{{ matrix.variant }}}}"
prompt = "Read TASK.md and do what it asks."
timeout = "3m"
gateway = {{ mode = "anthropic" }}

[tasks.fizzbuzz]
workspace = "tasks/fizzbuzz"

[tasks.hello]
workspace = "tasks/hello"

[matrix]
variant = ["careful", "quick", "judged"]
repeat = {repeat}
"""


class Billing:
    """The upstream: scripted answers, and per session what would have been billed."""

    def __init__(self) -> None:
        self.inner = ScriptedResponder(Scenario.load(PROJECT / "scenarios" / "upstream.toml"))
        self.by_session: dict[str, list[tuple[str, dict]]] = defaultdict(list)
        self.requests = 0
        self._lock = threading.Lock()

    def respond(self, request: ParsedRequest) -> ResponsePlan:
        plan = self.inner.respond(request)
        with self._lock:
            self.requests += 1
            if plan.events is not None:
                events = list(plan.events)
                plan.events = events
                start = next(e[1]["message"]["usage"] for e in events if e[0] == "message_start")
                delta = next(e[1]["usage"] for e in events if e[0] == "message_delta")
                self.by_session[request.session].append((request.model, {**start, **delta}))
        return plan


def log(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def fb(*args: str, home: Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FB), *args, "--home", str(home)], cwd=cwd, env=env, capture_output=True, text=True
    )


def docker0() -> str:
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "docker0"], capture_output=True, text=True).stdout
    return next(w.split("/")[0] for w in out.split() if "/" in w and w[0].isdigit())


def step_view(job: Path) -> list:
    rows = json.loads((job / "runs" / "manifest.json").read_text())
    return [(r["step"], r["ok"], r["text"], r["tool_calls"]) for r in rows]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--parallel", type=int, default=2)
    args = parser.parse_args()
    image = build_image(tag="flower-batch-runtime:bench", log=lambda line: None).id
    work = Path(tempfile.mkdtemp(prefix="fb-gateway-bench-"))
    project, home = work / "project", work / "home"
    shutil.copytree(PROJECT, project)
    (project / "jobs.toml").write_text(JOBS.format(repeat=args.repeat))
    billing = Billing()
    server = MessagesServer(billing, host="0.0.0.0").start()
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "sk-ant-bench-" + "k" * 32,
        "FLOWER_BATCH_UPSTREAM": f"http://{docker0()}:{server.port}",
        "COLUMNS": "160",
    }
    try:
        t0 = time.monotonic()
        matrix = fb("matrix", "jobs.toml", "-j", str(args.parallel), "--image", image, home=home, cwd=project,
                    env=env)  # fmt: skip
        matrix_s = time.monotonic() - t0
        log(f"matrix exit {matrix.returncode} in {matrix_s:.0f}s")
        jobs = sorted(p.parent for p in (home / "sample").glob("*/record.json"))
        metering = []
        for job in jobs:
            rec = json.loads((job / "record.json").read_text())
            meter = json.loads((job / "logs" / "meter.json").read_text())
            sessions = {e["request"]["session"] for e in read_recording(job / "logs" / "recording.jsonl")}
            billed = [item for s in sessions for item in billing.by_session.get(s, [])]
            tokens = {k: sum(u.get(k, 0) for _, u in billed) for k in TOKEN_FIELDS}
            cost = sum(cost_usd(m, u) or 0.0 for m, u in billed)
            cli = sum(r["cost_usd"] for r in json.loads((job / "runs" / "manifest.json").read_text()))
            metering.append({
                "job": job.name, "status": rec["status"], "responses": len(billed),
                "tokens_equal": meter["tokens"] == tokens, "metered_usd": rec["cost_usd"],
                "billed_usd": round(cost, 6), "cli_usd": round(cli, 6),
                "abs_error_usd": abs(rec["cost_usd"] - cost), "abs_diff_vs_cli_usd": abs(rec["cost_usd"] - cli),
            })  # fmt: skip
        upstream_before = billing.requests
        repro = []
        t0 = time.monotonic()
        for job in jobs:
            proc = fb("repro", f"sample/{job.name}", home=home, cwd=project, env=env)
            new = home / "repro" / f"sample.{job.name}.r1"
            report = json.loads((new / "repro.json").read_text()) if (new / "repro.json").exists() else {}
            same = proc.returncode == 0 and step_view(job) == step_view(new) and report.get("identical")
            repro.append({"job": job.name, "exit": proc.returncode, "identical": bool(same)})
            log(f"repro {job.name}: {'identical' if same else 'DIFFERENT'}")
        repro_s = time.monotonic() - t0
        identical = sum(r["identical"] for r in repro)
        doc = {
            "jobs": len(jobs),
            "matrix": {
                "exit": matrix.returncode,
                "seconds": round(matrix_s, 1),
                "statuses": sorted(m["status"] for m in metering),
            },  # fmt: skip
            "metering": {
                "responses": sum(m["responses"] for m in metering),
                "jobs_with_exact_tokens": sum(m["tokens_equal"] for m in metering),
                "max_abs_error_usd_vs_upstream": max(m["abs_error_usd"] for m in metering),
                "max_abs_diff_usd_vs_cli": max(m["abs_diff_vs_cli_usd"] for m in metering),
                "total_metered_usd": round(sum(m["metered_usd"] for m in metering), 6),
                "total_billed_usd": round(sum(m["billed_usd"] for m in metering), 6),
                "per_job": metering,
            },
            "reproduction": {
                "identical": identical,
                "rate": identical / len(jobs) if jobs else None,
                "upstream_requests_during_repro": billing.requests - upstream_before,
                "seconds": round(repro_s, 1),
                "per_job": repro,
            },
            "work_dir": str(work),
        }
        print(json.dumps(doc, indent=2))
        return 0 if identical == len(jobs) else 1
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
