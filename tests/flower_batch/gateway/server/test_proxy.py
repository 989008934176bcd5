"""The gateway's proxy, metering, budgets, recording and replay in-process, with the real
`flower` + SDK + bundled CLI as the client and a second scripted server as "the real API".

    flower run (real CLI) -> gateway: MessagesServer(JobRouter(Tap(mode responder)))
                          -> upstream: MessagesServer(Counting(ScriptedResponder))

The same pieces run in the gateway container (gateway/test_modes_on_docker.py runs them there).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from flower.scripted import MessagesServer
from flower_batch.gateway.metering import read_lines, read_meter
from flower_batch.gateway.prices import cost_usd
from flower_batch.gateway.recording import read_recording, read_state, stage_recording
from flower_batch.gateway.server.responders import build_gateway
from flower_batch.gateway.server.routing import JobRouter, PerJobLog
from flower_batch.gateway.tokens import job_token, new_secret
from flower_batch.jobmodel.record import new_record, write_record
from flower_batch.jobmodel.spec import JobSpec
from tests.gateway_fixtures.upstream import Counting

REPO = Path(__file__).resolve().parents[4]
FLOWER = REPO / ".venv" / "bin" / "flower"
HOST_KEY = "sk-ant-test-HOSTKEY-" + "7" * 24
MODEL = "claude-sonnet-4-5"
PROMPT = "Read TASK.md and do what it asks. Run the program once to check it."


@dataclass
class Rig:
    tmp: Path
    upstream: MessagesServer
    counting: Counting
    gateway: MessagesServer
    secret: str
    batch: Path
    runs: list[subprocess.CompletedProcess[str]] = field(default_factory=list)

    def run_flower(self, job: str, target: str, *, prompt: str = PROMPT, task: str = "fizzbuzz") -> Path:
        """`flower run` as job `job` through the gateway; returns a copy of its manifest.

        Workspace and run dir are at fixed paths, wiped before each run, as /workspace and /runs
        are in a container: the CLI's system prompt names them, so replay needs them unchanged.
        """
        ws, runs = self.tmp / "workspace", self.tmp / "runs"
        for folder in (ws, runs):
            shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(REPO / "examples" / "tasks" / task, ws)
        env = {
            **os.environ,
            **self.gateway.env(runs / ".claude", prefix=f"/j/{job}"),
            "ANTHROPIC_API_KEY": job_token(self.secret, job),
            "ANTHROPIC_MODEL": MODEL,
        }
        env.pop("FLOWER_BATCH_UPSTREAM", None)
        proc = subprocess.run(
            [str(FLOWER), "-w", str(ws), "-r", str(runs), "run", target, "--fresh", "--prompt", prompt],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        self.runs.append(proc)
        kept = self.tmp / "manifests" / f"{job}.json"
        kept.parent.mkdir(exist_ok=True)
        shutil.copyfile(runs / "manifest.json", kept)
        return kept

    def manifest(self, kept: Path) -> list[dict[str, Any]]:
        return json.loads(kept.read_text())


def _gateway(mode: str, batch: Path, upstream: MessagesServer, secret: str, **kw: Any) -> MessagesServer:
    tap = build_gateway(
        mode, batch_dir=batch, upstream=upstream.base_url, environ={"FB_UPSTREAM_KEY": HOST_KEY}, **kw
    )
    server = MessagesServer(JobRouter(tap, secret))
    server.log = PerJobLog(batch)  # type: ignore[assignment]
    return server


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    counting = Counting(REPO / "examples" / "scenarios" / "demo.toml")
    secret = new_secret()
    batch = tmp_path / "batch"
    with MessagesServer(counting) as upstream:
        gateway = _gateway("anthropic", batch, upstream, secret)
        with gateway:
            yield Rig(tmp_path, upstream, counting, gateway, secret, batch)


def _expected_cost(rig: Rig) -> float:
    return sum(cost_usd(m, u) for m, u in zip(rig.counting.models, rig.counting.usages, strict=True))


@pytest.mark.slow
def test_proxy_meters_exactly_what_the_upstream_billed_and_records_every_exchange(rig: Rig) -> None:
    runs = rig.run_flower("job-a", "examples/workflows.py:careful")
    assert rig.runs[-1].returncode == 0, rig.runs[-1].stderr[-2000:]
    # the upstream saw the host's key on every request, never the job's token
    assert set(rig.counting.credentials) == {hashlib.sha256(HOST_KEY.encode()).hexdigest()}
    assert len(rig.counting.usages) == 5
    meter = read_meter(rig.batch / "job-a" / "logs")
    assert meter is not None and meter.exchanges == 5 and meter.incomplete == 0
    for key in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        assert meter.tokens[key] == sum(u.get(key, 0) for u in rig.counting.usages), key
    assert meter.cost_usd == pytest.approx(_expected_cost(rig), abs=1e-9)
    # independent check: the CLI's own total for the same responses (same price table)
    assert meter.cost_usd == pytest.approx(sum(r["cost_usd"] for r in rig.manifest(runs)), abs=1e-6)
    recording = read_recording(rig.batch / "job-a" / "logs" / "recording.jsonl")
    assert [e["outcome"] for e in recording] == ["stream"] * 5
    counts = [e["request"]["n_messages"] for e in recording]
    assert [n - counts[0] for n in counts] == [0, 2, 4, 6, 8]  # one turn (answer + tool result) each
    assert all(e["response"]["events"][-1][0] == "message_stop" for e in recording)
    logs = "".join(p.read_text() for p in (rig.batch / "job-a" / "logs").iterdir())
    assert HOST_KEY not in logs and job_token(rig.secret, "job-a") not in logs


def test_a_wrong_token_gets_401_and_reaches_nothing(rig: Rig) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", rig.gateway.port, timeout=10)
    body = json.dumps({"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    conn.request("POST", "/j/job-a/v1/messages", body, {"x-api-key": job_token(rig.secret, "job-b")})
    resp = conn.getresponse()
    answer = json.loads(resp.read())
    assert resp.status == 401 and answer["error"]["type"] == "authentication_error"
    assert "unknown token for job job-a" in answer["error"]["message"]
    assert rig.counting.credentials == [] and not (rig.batch / "job-a").exists()


def test_a_client_gone_mid_stream_keeps_its_metered_input(tmp_path: Path) -> None:
    slow = {
        "rules": [
            {
                "name": "slow",
                "reply": [{"text": "a long answer"}] * 6,
                "chunk_delay_s": 0.3,
                "reply_model": "{model}",
                "usage": {"input_tokens": 5000, "output_tokens": 700, "cache_read_input_tokens": 40},
            }
        ]
    }
    secret = new_secret()
    with MessagesServer(Counting(slow)) as upstream, _gateway("anthropic", tmp_path, upstream, secret) as gw:
        conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
        body = json.dumps(
            {"model": MODEL, "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "go"}]}
        )
        conn.request("POST", "/j/job-k/v1/messages", body, {"x-api-key": job_token(secret, "job-k")})
        resp = conn.getresponse()
        assert resp.status == 200 and resp.readline().startswith(b"event: message_start")
        conn.sock.close()  # the job dies mid-stream
        conn.close()
        logs = tmp_path / "job-k" / "logs"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (logs / "recording.jsonl").exists():
            time.sleep(0.1)
    meter = read_meter(logs)
    assert meter is not None and meter.tokens["input_tokens"] == 5000 and meter.incomplete == 1
    assert meter.cost_usd == pytest.approx(
        cost_usd(MODEL, {"input_tokens": 5000, "output_tokens": 1, "cache_read_input_tokens": 40})
    )
    (entry,) = read_recording(logs / "recording.jsonl")
    assert entry["outcome"] == "client-gone" and entry["response"]["events"][0][0] == "message_start"


@pytest.mark.slow
def test_a_job_over_its_budget_is_refused_with_a_fatal_error(rig: Rig) -> None:
    (rig.batch / "job-b").mkdir(parents=True)
    # two responses of the demo scenario cost $0.0174 at sonnet prices: the third request is refused
    spec = JobSpec(id="job-b", task="t", variant="v", repeat=1, matrix={}, prompt="p", budget_usd=0.015)
    write_record(rig.batch / "job-b" / "record.json", new_record(spec, batch="b", image_id="sha256:x"))
    runs = rig.run_flower("job-b", "examples/workflows.py:careful")
    assert rig.runs[-1].returncode != 0
    assert len(rig.counting.usages) == 2
    meter = read_meter(rig.batch / "job-b" / "logs")
    assert (
        meter is not None and meter.refused == 1 and "budget exhausted for job job-b" in meter.refused_reason
    )
    (row,) = rig.manifest(runs)
    assert not row["ok"] and "402" in row["error"] and "budget" in row["error"]
    assert row["attempts"] == 1  # flower's resilience did not retry it
    refused = [
        e
        for e in read_recording(rig.batch / "job-b" / "logs" / "recording.jsonl")
        if e["outcome"] == "refused"
    ]
    assert len(refused) == 1 and refused[0]["response"]["status"] == 402


@pytest.mark.slow
def test_replay_reproduces_with_no_upstream_request_and_reports_a_divergence(
    rig: Rig, tmp_path: Path
) -> None:
    original = rig.run_flower("orig", "examples/workflows.py:careful")
    assert rig.runs[-1].returncode == 0, rig.runs[-1].stderr[-2000:]
    upstream_before = len(rig.counting.usages)
    secret = new_secret()
    rig.secret = secret
    with _gateway("replay", rig.batch, rig.upstream, secret) as gw:
        rig.gateway = gw
        stage_recording(rig.batch / "orig", rig.batch / "again")
        again = rig.run_flower("again", "examples/workflows.py:careful")
        assert rig.runs[-1].returncode == 0, rig.runs[-1].stderr[-2000:]
        stage_recording(rig.batch / "orig", rig.batch / "changed")
        rig.run_flower("changed", "examples/workflows.py:quick")
        assert rig.runs[-1].returncode != 0
    assert len(rig.counting.usages) == upstream_before  # nothing went upstream
    view = [(r["step"], r["ok"], r["tool_calls"]) for r in rig.manifest(original)]
    assert [(r["step"], r["ok"], r["tool_calls"]) for r in rig.manifest(again)] == view
    assert read_state(rig.batch / "again" / "logs")["served"] == 5
    replay_meter = read_meter(rig.batch / "again" / "logs")
    assert replay_meter.free and replay_meter.cost_usd == 0 and replay_meter.exchanges == 5
    div = read_state(rig.batch / "changed" / "logs")["divergence"]
    assert (div["session_index"], div["request_index"], div["exchange"]) == (1, 1, 1)
    assert div["field"] == "system prompt (the agent's instructions)"
    assert div["message"].startswith("replay diverged at session 1, request 1 (exchange 1 of the recording)")
    assert len(read_lines(rig.batch / "changed" / "logs" / "recording.jsonl")) == 1  # the refusal, recorded


@pytest.mark.slow
def test_errors_and_cut_streams_are_recorded_and_replayed_as_they_happened(tmp_path: Path) -> None:
    flaky = {
        "rules": [
            {
                "name": "flaky",
                "last_user_contains": "Say hi",
                "sequence": [
                    {"error": 529},
                    {"reply": [{"text": "never finished"}], "cut_after": 3},
                    {"reply": [{"text": "hi after trouble"}]},
                ],
            }
        ]
    }
    flow = tmp_path / "flow.py"
    flow.write_text(
        "from flower import AgentSpec, Step, Workflow\n"
        "def w():\n    return Workflow([Step('s', AgentSpec('a', instructions='ROLE: a'), 'Say hi')])\n"
    )
    counting = Counting(flaky)
    batch = tmp_path / "batch"

    def run(job: str, mode: str, upstream: MessagesServer) -> list[dict]:
        with _gateway(mode, batch, upstream, "s3cret") as gw:
            ws, runs = tmp_path / "workspace", tmp_path / "runs"
            for folder in (ws, runs):
                shutil.rmtree(folder, ignore_errors=True)
            ws.mkdir()
            env = {
                **os.environ,
                **gw.env(runs / ".claude", prefix=f"/j/{job}", max_retries=None),  # the CLI's own retries
                "ANTHROPIC_API_KEY": job_token("s3cret", job),
            }
            proc = subprocess.run(
                [str(FLOWER), "-w", str(ws), "-r", str(runs), "run", f"{flow}:w", "--fresh"],
                env=env, capture_output=True, text=True, timeout=180,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-2000:]
            return json.loads((runs / "manifest.json").read_text())

    with MessagesServer(counting) as upstream:
        original = run("orig", "anthropic", upstream)
        recorded = read_recording(batch / "orig" / "logs" / "recording.jsonl")
        assert [(e["outcome"], e["response"]["status"]) for e in recorded] == [
            ("response", 529),
            ("upstream-cut", 200),
            ("stream", 200),
        ]
        assert len(recorded[1]["response"]["events"]) == 3
        sent = len(counting.credentials)
        stage_recording(batch / "orig", batch / "again")
        again = run("again", "replay", upstream)
        assert len(counting.credentials) == sent
    assert [(r["step"], r["ok"], r["text"]) for r in again] == [
        (r["step"], r["ok"], r["text"]) for r in original
    ]
    assert original[0]["text"] == "hi after trouble"
    state = read_state(batch / "again" / "logs")
    assert state["served"] == state["recorded"] == 3 and state["divergence"] is None
