"""The gateway's real modes end to end on Docker (issue 7): the job container -> the gateway
container (proxy mode, host key in its env only) -> "the real API", which here is a second
scripted server on the host. Then budgets, a job killed mid-stream, and `flower-batch repro`
replaying recorded jobs with no upstream request at all.

Every command runs as a subprocess (`flower-batch ... --home`), as a user or CI would run it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from flower.scripted import MessagesServer
from flower_batch.backend.confinement import sandbox_user
from flower_batch.gateway.prices import cost_usd
from tests.batch_fixtures.rig import (
    JOB,
    MANAGED,
    ROLE,
    Job,
    docker_client,
    fb,
    fb_start,
    leftovers,
    remove_resources,
    runtime_image,
    wait_for,
)
from tests.gateway_fixtures.upstream import PROJECT, Counting

pytestmark = [pytest.mark.docker, pytest.mark.slow]

HOST_KEY = "sk-ant-test-HOSTKEY-" + "q" * 24
PROMPT = "Read TASK.md and do what it asks."
TOKEN_KINDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def docker_host_ip() -> str:
    """The host's address on docker0: where containers reach a server of this test process."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "docker0"], capture_output=True, text=True)
    for word in out.stdout.split():
        if "/" in word and word[0].isdigit():
            return word.split("/")[0]
    pytest.skip("no docker0 address: the test's upstream server is unreachable from containers")


@dataclass
class World:
    image: str
    home: Path
    project: Path
    upstream: Counting

    def fb(self, *args: str | Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return fb(*args, home=self.home, cwd=self.project, timeout=timeout)

    def run(self, name: str, task: str, flow: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return self.fb(
            "run", f"tasks/{task}", "--workflow", f"flows.py:{flow}", "--prompt", PROMPT,
            "--image", self.image, "--name", name, *extra,
        )  # fmt: skip

    def job(self, name: str, batch: str = "adhoc") -> Job:
        return Job(self.home, batch, name)

    def billed(self, since: int, until: int | None = None) -> tuple[dict[str, int], float]:
        """Tokens and cost of the upstream's answers [since:until], at the documented prices."""
        usages = self.upstream.usages[since:until]
        models = self.upstream.models[since:until]
        tokens = {k: sum(u.get(k, 0) for u in usages) for k in TOKEN_KINDS}
        return tokens, sum(cost_usd(m, u) for m, u in zip(models, usages, strict=True))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    image = runtime_image()
    root = tmp_path_factory.mktemp("gateway")
    project = root / "project"
    shutil.copytree(PROJECT, project)
    counting = Counting()
    server = MessagesServer(counting, host="0.0.0.0").start()
    mp = pytest.MonkeyPatch()
    mp.setenv("ANTHROPIC_API_KEY", HOST_KEY)  # the host's key: read by the orchestrator, given to the gateway
    mp.setenv("FLOWER_BATCH_UPSTREAM", f"http://{docker_host_ip()}:{server.port}")
    home = root / "home"
    home.mkdir()
    try:
        yield World(image, home, project, counting)
    finally:
        mp.undo()
        server.stop()
        for batch in [p.name for p in home.iterdir() if p.is_dir() and not p.name.startswith(".")]:
            remove_resources(leftovers(home, batch))


@pytest.fixture(scope="module")
def recorded(world: World) -> dict[str, tuple[int, int]]:
    """Three jobs through the proxy, each with the range of upstream answers it got: multi-step
    with tools (careful), one step (quick), and a judge round (judged)."""
    spans = {}
    for name, task, flow in (("careful", "fizzbuzz", "careful"), ("quick", "hello", "quick"),
                             ("judged", "hello", "judged")):  # fmt: skip
        before = world.upstream.count
        proc = world.run(name, task, flow)
        assert proc.returncode == 0, proc.stderr[-3000:]
        spans[name] = (before, world.upstream.count)
    return spans


def test_proxy_jobs_complete_and_are_metered_exactly(world: World, recorded: dict) -> None:
    assert set(world.upstream.credentials) == {hashlib.sha256(HOST_KEY.encode()).hexdigest()}
    for name, (since, until) in recorded.items():
        rec = world.job(name).record()
        assert rec["status"] == "passed" and rec["gateway_mode"] == "anthropic", rec
        meter = json.loads((world.job(name).root / "logs" / "meter.json").read_text())
        tokens, cost = world.billed(since, until)
        assert meter["tokens"] == tokens, name
        assert meter["exchanges"] == until - since and meter["incomplete"] == 0
        assert rec["cost_usd"] == pytest.approx(cost, abs=1e-6) and meter["cost_usd"] == pytest.approx(
            cost, abs=1e-6
        )
        # the CLI's own total agrees (same price table, computed inside the container)
        rows = world.job(name).manifest()
        assert rec["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in rows), abs=1e-5)
    shown = world.fb("show", "careful")
    tokens = world.billed(*recorded["careful"])[0]
    assert shown.returncode == 0 and f"over 5 responses · in {tokens['input_tokens']} · out" in shown.stdout
    listed = json.loads(world.fb("ls", "--json").stdout)
    assert {r["job"]: r["cost_usd"] for r in listed}["careful"] == world.job("careful").record()["cost_usd"]


def test_a_budget_stops_the_job_with_status_budget(world: World) -> None:
    before = world.upstream.count
    # the careful job's first two answers cost $0.0404 at claude-opus-5-5 prices; the third is refused
    proc = world.run("budgeted", "fizzbuzz", "careful", "--budget-usd", "0.03")
    assert proc.returncode == 1, proc.stderr[-2000:]
    rec = world.job("budgeted").record()
    assert rec["status"] == "budget" and "budget exhausted for job budgeted" in rec["reason"]
    assert world.upstream.count - before == 2
    assert rec["cost_usd"] == pytest.approx(world.billed(before)[1], abs=1e-6)
    (row,) = world.job("budgeted").manifest()
    assert "402" in row["error"] and row["attempts"] == 1  # fatal: flower did not retry it


def test_a_batch_budget_stops_the_rest_of_the_matrix(world: World) -> None:
    (world.project / "budget.toml").write_text(
        """
[batch]
name = "capped"
budget_usd = 0.02

[defaults]
workflow = "flows:quick"
prompt = "Read TASK.md and do what it asks."
timeout = "2m"
gateway = { mode = "anthropic" }

[tasks.hello]
workspace = "tasks/hello"

[matrix]
repeat = 3
"""
    )
    before = world.upstream.count
    proc = world.fb("matrix", "budget.toml", "-j", "1", "--image", world.image, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    statuses = {
        p.parent.name: json.loads(p.read_text())["status"]
        for p in (world.home / "capped").glob("*/record.json")
    }
    assert sorted(statuses.values()) == ["budget", "skipped", "skipped"], statuses
    assert world.upstream.count - before == 2  # read the task ($0.0161), write hello.txt: then refused
    doc = json.loads((world.home / "capped" / "report" / "results.json").read_text())
    assert sorted(j["status"] for j in doc["jobs"]) == ["budget", "skipped", "skipped"]
    skipped = [j for j in doc["jobs"] if j["status"] == "skipped"]
    assert all("batch budget" in j["outcome"]["reason"] for j in skipped)
    assert not leftovers(world.home, "capped")


def test_docker_kill_mid_stream_keeps_the_metered_cost(world: World, tmp_path: Path) -> None:
    before = world.upstream.count
    proc = fb_start(
        "run", "tasks/slow", "--workflow", "flows.py:quick", "--prompt", PROMPT, "--image", world.image,
        "--name", "killed", home=world.home, cwd=world.project, log=tmp_path / "killed.log",
    )  # fmt: skip
    meter_log = world.job("killed").root / "logs" / "meter.jsonl"
    wait_for(
        "the slow answer to start streaming",
        lambda: meter_log.exists() and '"input_tokens":9000' in meter_log.read_text(),
    )
    client = docker_client()
    try:
        (container,) = client.containers.list(
            ignore_removed=True, filters={"label": [f"{MANAGED}=1", f"{JOB}=killed", f"{ROLE}=job"]}
        )
        own = {m["Destination"]: m["Source"] for m in container.attrs["Mounts"]}["/run/flower-gateway"]
        # meanwhile, a wrong token on the job's own socket is refused
        probe = (
            "import http.client, json, socket\n"
            "class Unix(http.client.HTTPConnection):\n"
            "    def connect(self):\n"
            "        self.sock = socket.socket(socket.AF_UNIX)\n"
            "        self.sock.connect('/run/flower-gateway/gateway.sock')\n"
            "c = Unix('gateway', timeout=10)\n"
            "c.request('POST', '/j/killed/v1/messages', body=b'{}', headers={'x-api-key': 'fbj-not-the-token'})\n"
            "r = c.getresponse()\n"
            "print(r.status, json.loads(r.read())['error']['type'])\n"
        )
        out = client.containers.run(
            world.image,
            ["python3", "-c", probe],
            network_mode="none",
            remove=True,
            volumes={own: {"bind": "/run/flower-gateway", "mode": "rw"}},
            user=sandbox_user(),
        )
        assert out.decode().split() == ["401", "authentication_error"]
        container.kill()
    finally:
        client.close()
    assert proc.wait(timeout=120) == 3  # infrastructure
    rec = world.job("killed").record()
    # killed from outside: no verdict (an infrastructure error), and the record says what happened
    assert rec["status"] == "error" and rec["class"] == "infrastructure"
    assert rec["reason"].startswith("killed from outside: SIGKILL (exit 137)"), rec["reason"]
    # the slow answer never finished: its input was billed, its output was not yet known
    start_of_slow = dict(world.upstream.usages[before + 1], output_tokens=1)
    expected = cost_usd(world.upstream.models[before], world.upstream.usages[before]) + cost_usd(
        world.upstream.models[before + 1], start_of_slow
    )
    assert rec["cost_usd"] == pytest.approx(expected, abs=1e-6) and rec["cost_usd"] > 0
    meter = json.loads((world.job("killed").root / "logs" / "meter.json").read_text())
    assert meter["incomplete"] == 1 and meter["tokens"]["input_tokens"] == 3100 + 9000


def test_repro_replays_recorded_jobs_identically_with_no_upstream_request(
    world: World, recorded: dict
) -> None:
    before = world.upstream.count
    for name in recorded:
        proc = world.fb("repro", name, timeout=240)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "reproduction identical" in proc.stdout
        repro = world.job(f"adhoc.{name}.r1", batch="repro")
        assert repro.record()["status"] == "passed" and repro.record()["gateway_mode"] == "replay"
        assert repro.record()["image_id"] == world.job(name).record()["image_id"]

        def view(job: Job) -> list:
            return [(r["step"], r["ok"], r["text"], r["tool_calls"]) for r in job.manifest()]

        assert view(repro) == view(world.job(name))
        report = json.loads((repro.root / "repro.json").read_text())
        assert report["identical"] and report["replay"]["served"] == report["replay"]["recorded"]
        assert report["files"]["original"] == report["files"]["repro"]
    assert world.upstream.count == before  # replay: not one request went upstream
    judged = json.loads((world.home / "repro" / "adhoc.judged.r1" / "repro.json").read_text())
    steps = [(s["step"], s["verdict"]) for s in judged["steps"]["repro"]]
    assert steps == [("work", None), ("judge", "not_yet"), ("judge#round2", "achieved")]


def test_repro_of_a_changed_workflow_reports_the_first_divergence(world: World, recorded: dict) -> None:
    proc = world.fb(
        "repro", "careful", "--workflow", "flows.py:changed", "--name", "careful-changed", timeout=240
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    rec = world.job("careful-changed", batch="repro").record()
    assert rec["status"] == "error"
    assert rec["reason"].startswith(
        "replay diverged at session 1, request 1 (exchange 1 of the recording): system prompt"
    ), rec["reason"]
    assert "differs" in proc.stdout and "replay diverged" in proc.stdout


def test_repro_refuses_drift_unless_allowed(world: World, recorded: dict) -> None:
    record_path = world.job("quick").root / "record.json"
    original = record_path.read_text()
    data = json.loads(original)
    data["versions"]["cli"] = "0.0.1"
    record_path.write_text(json.dumps(data))
    try:
        proc = world.fb("repro", "quick")
        assert proc.returncode == 2 and "CLI 0.0.1 -> " in proc.stderr and "--allow-drift" in proc.stderr
        assert "Traceback" not in proc.stderr
    finally:
        record_path.write_text(original)


def test_the_host_key_is_in_no_file_log_or_image(world: World, recorded: dict) -> None:
    hits = [p for p in world.home.rglob("*") if p.is_file() and HOST_KEY.encode() in p.read_bytes()]
    assert hits == []
    client = docker_client()
    try:
        image = client.images.get(world.image)
        assert HOST_KEY not in json.dumps(image.attrs) and HOST_KEY not in json.dumps(image.history())
    finally:
        client.close()
