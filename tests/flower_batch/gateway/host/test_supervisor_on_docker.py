"""The supervised gateway on the real engine, with the real CLI in the job (issue 10 item 3):
`docker kill` of the gateway mid-job is survived (same session, cost metered exactly, the record
says the gateway was restarted); a gateway that keeps dying ends its job with the reason.

The job is bench/soakjob.py's: a step that loops a Bash tool call, decided by the workspace.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import soakjob
from flower.catalogue.runtime import RESUME_PROMPT
from flower.catalogue.terminal import NOTICE_OFFLINE_VIA
from flower_batch.gateway.host.sidecar import READY_LINE
from flower_batch.jobmodel.image import PinnedImage
from tests.batch_fixtures.rig import (
    BATCH,
    LEASE,
    MANAGED,
    ROLE,
    Job,
    docker_client,
    fb,
    fb_start,
    leftovers,
    message_texts,
    private_home,
    runtime_image,
    wait_for,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def image_id() -> str:
    return runtime_image()


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield from private_home(tmp_path)


def _served(job: Job) -> int:
    return sum(1 for r in job.gateway_log() if r.get("endpoint") == "messages" and r.get("status") == 200)


def _gateway(job: Job):  # type: ignore[no-untyped-def]
    """The job's gateway container (the one of the orchestrator session in its record)."""
    session = job.record().get("session")
    client = docker_client()
    try:
        found = client.containers.list(
            all=True,
            ignore_removed=True,
            filters={"label": [f"{MANAGED}=1", f"{BATCH}=adhoc", f"{ROLE}=gateway", f"{LEASE}={session}"]},
        )
    finally:
        client.close()
    return found[0] if found else None


def _start(home: Path, tmp_path: Path, name: str, image_id: str, *, turns: int, delay_s: float = 0.0):  # type: ignore[no-untyped-def]
    files = soakjob.write_project(tmp_path / name, leg=turns, handoff_at=None, delay_s=delay_s)
    proc = fb_start(
        "run",
        files["workspace"],
        "-f",
        f"{files['flows']}:main",
        "--prompt",
        soakjob.PROMPT,
        "--scenario",
        files["scenario"],
        "--persistent",
        "--name",
        name,
        "--image",
        image_id,
        "--timeout",
        "10m",
        home=home,
        log=tmp_path / f"{name}.out",
    )
    return proc, Job(home, "adhoc", name), files


def test_a_gateway_killed_mid_job_is_restarted_and_the_job_finishes_exactly_metered(
    image_id: str, home: Path, tmp_path: Path
) -> None:
    turns = 16
    proc, job, files = _start(home, tmp_path, f"killed-gw-{secrets.token_hex(2)}", image_id, turns=turns)
    wait_for("half the turns", lambda: _served(job) >= turns // 2 or proc.poll() is not None, timeout=300)
    assert proc.poll() is None, (tmp_path / f"{job.job}.out").read_text()
    gateway = _gateway(job)
    assert gateway is not None
    before_kill = gateway.id
    gateway.kill()  # SIGKILL, as `docker kill` does
    assert proc.wait(timeout=300) == 0, (tmp_path / f"{job.job}.out").read_text()
    assert "gateway: the gateway was restarted 1×" in (tmp_path / f"{job.job}.out").read_text()

    record = job.record()
    assert record["status"] == "passed", record
    health = record["gateway_health"]
    assert health["restarts"] == 1 and health["gave_up"] is None
    assert [d["exit_code"] for d in health["deaths"]] == [137]
    # the conversation went on in its one session, the one lineage knows
    log = job.gateway_log()
    sessions = {r["session"] for r in log if r.get("endpoint") == "messages"}
    assert sessions == {job.lineage()["steps"]["count"]}
    assert (job.root / "workspace" / ".count").read_text().strip() == str(turns)
    # metered exactly what the scripted model sent: nothing lost, nothing counted twice (an
    # answer the kill cut is counted at its first event, once, whether or not the log saw it)
    expected = soakjob.expected_of_one_leg(files["scenario"], log, turns)
    meter = json.loads((job.root / "logs" / "meter.json").read_text())
    assert expected.accepts(meter, unlogged_starts=1), (meter, expected)
    # the log lost at most the line of the answer the gateway was sending when it was killed
    assert soakjob.expected_usage(files["scenario"], log).complete >= expected.complete - 1
    assert record["cost_usd"] == pytest.approx(meter["cost_usd"], abs=1e-6) and record["cost_usd"] > 0
    shown = fb("show", job.job, home=home)
    assert "restarted 1×" in shown.stdout and "exit 137" in shown.stdout, shown.stdout
    assert before_kill  # the supervisor restarted that container in place; at the end it is removed
    assert not leftovers(home, "adhoc"), leftovers(home, "adhoc").describe()


def test_a_gateway_that_keeps_dying_ends_its_job_with_the_reason(
    image_id: str, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWER_BATCH_GATEWAY_RESTARTS", "1")  # one restart, then give up
    proc, job, _ = _start(
        home, tmp_path, f"dying-gw-{secrets.token_hex(2)}", image_id, turns=1000, delay_s=0.2
    )
    wait_for("the job to be served", lambda: _served(job) >= 2 or proc.poll() is not None, timeout=300)
    kills = 0
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        gateway = _gateway(job)
        # kill each life of the gateway once it is serving (its ready line printed once more)
        if (
            gateway is not None
            and gateway.status == "running"
            and (gateway.logs().decode().count(READY_LINE) > kills)
        ):
            gateway.kill()
            kills += 1
        time.sleep(0.3)
    assert proc.wait(timeout=60) == 3, (tmp_path / f"{job.job}.out").read_text()
    assert kills == 2
    record = job.record()
    assert record["status"] == "error", record
    assert "kept dying" in record["reason"] and "exit 137" in record["reason"], record["reason"]
    health = record["gateway_health"]
    assert health["gave_up"] == record["reason"] and health["restarts"] == 1
    assert [d["exit_code"] for d in health["deaths"]] == [137, 137]
    rows = json.loads(fb("ls", "--json", home=home).stdout)
    assert [r["gateway_restarts"] for r in rows if r["job"] == job.job] == [1]
    assert not leftovers(home, "adhoc"), leftovers(home, "adhoc").describe()


@pytest.mark.anyio
async def test_a_gateway_down_longer_than_the_cli_retries_is_ridden_out_by_flowers_resilience(
    image_id: str, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway comes back only after 45 s, far longer than the CLI's own retries: the CLI
    gives up, and flower's resilience takes over — it retries the step, probes the gateway
    (unreachable: it says it is offline and waits), and once it answers resumes the SAME session
    with its resume prompt. The job passes, metered exactly. In process, so the restart's
    backoff can be made long.

    Without a request timeout the CLI's request just waits until the gateway is back (seen with
    a 20 s outage: attempts 1, no CLI retry in the transcript; a killed container apparently
    sends the job no reset), and the CLI rides the outage out, its own retries never spent. So the
    job's CLI gets a 10 s request timeout (API_TIMEOUT_MS): its hung request fails, its 2 retries
    (flower's CLAUDE_CODE_MAX_RETRIES) find no gateway within seconds, and the step's attempt
    ends. On a loaded machine an answer can take longer than that timeout, and the CLI asks again
    for an answer the gateway finished: so the meter may count such an answer whole, once."""
    import anyio

    from flower_batch.backend.docker.backend import DockerBackend
    from flower_batch.gateway.host import supervisor
    from flower_batch.layout import Home
    from flower_batch.running.batch import run_one
    from flower_batch.running.jobs import adhoc_spec
    from flower_batch.running.plan import BatchPlan

    slow = supervisor.RestartPolicy(backoff_s=45.0, backoff_max_s=45.0)
    from flower_batch.gateway.host.sidecar import GatewaySettings

    turns = 12
    name = f"outage-{secrets.token_hex(2)}"
    files = soakjob.write_project(tmp_path / name, leg=turns, handoff_at=None)
    spec = adhoc_spec(
        workspace=files["workspace"],
        task=None,
        workflow=f"{files['flows']}:main",
        prompt=soakjob.PROMPT,
        name=name,
        timeout="10m",
        cpus=None,
        memory=None,
        env={"API_TIMEOUT_MS": "10000"},
        secrets_=[],
        scenario=files["scenario"],
        environ={},
        persistent=True,
    )
    job = Job(home, "adhoc", name)
    records: list = []

    async def run() -> None:
        async with DockerBackend() as backend:
            records.append(
                await run_one(
                    backend,
                    BatchPlan(
                        Home(home),
                        "adhoc",
                        ((spec, None),),
                        PinnedImage(image_id, {}),
                        settings=GatewaySettings(restarts=slow),
                    ),
                    lambda job, state: None,
                )
            )

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(300):
            while _served(job) < turns // 2:
                await anyio.sleep(0.2)
        gateway = await anyio.to_thread.run_sync(_gateway, job)
        assert gateway is not None
        await anyio.to_thread.run_sync(gateway.kill)
        killed_at = time.monotonic()
    record = records[0]
    assert record.status == "passed", record
    assert record.gateway_health and record.gateway_health["restarts"] == 1
    log = job.gateway_log()
    messages = [r for r in log if r.get("endpoint") == "messages"]
    assert {r["session"] for r in messages} == {job.lineage()["steps"]["count"]}  # one session throughout
    # the outage was real (no answer for the restart's 45 s), and the loop went on after it
    gaps = [b["time"] - a["time"] for a, b in zip(messages, messages[1:], strict=False)]
    assert max(gaps) >= 19, gaps
    assert max(gaps) >= 44, gaps
    assert (job.root / "workspace" / ".count").read_text().strip() == str(turns)
    assert time.monotonic() - killed_at < 300
    expected = soakjob.expected_of_one_leg(files["scenario"], log, turns)
    meter = json.loads((job.root / "logs" / "meter.json").read_text())
    # the killed gateway may have begun an answer it never logged (client_timeout: see above)
    assert expected.accepts(meter, client_timeout=True, unlogged_starts=1), (meter, expected)
    assert soakjob.expected_usage(files["scenario"], log).complete >= expected.complete - 1
    # flower's path, not the CLI's: the step took a second attempt that resumed its session...
    (row,) = [r for r in job.manifest() if r["step"] == "count"]
    assert row["ok"] and row["attempts"] >= 2 and row["resumed"], row
    assert row["session_id"] == job.lineage()["steps"]["count"]
    assert row["errors"], row  # what the CLI gave up with, once its retries were spent
    # ...after probing the gateway and finding it down (flower's offline notice, in the job's log)...
    shown = job.container_log()
    # (the CLI's loopback port, relayed to the job's own socket: flower names both)
    assert (
        NOTICE_OFFLINE_VIA.format(host="127.0.0.1", port=8080, via="/run/flower-gateway/gateway.sock")
        in shown
    ), shown[-3000:]
    assert "retry after transient error" in shown, shown[-3000:]
    # ...and the first request after the outage is flower's resume prompt, not a retry of the CLI's
    gap = next(
        i for i, (a, b) in enumerate(zip(messages, messages[1:], strict=False)) if b["time"] - a["time"] >= 44
    )
    before, after = messages[gap], messages[gap + 1]
    assert RESUME_PROMPT not in message_texts(before)
    assert RESUME_PROMPT in message_texts(after), message_texts(after)[-500:]
    assert after["session"] == row["session_id"]


# -- a gateway really OOM-killed -------------------------------------------------------------------
# The job's workflow sends its gateway requests too large for the gateway's memory limit (set by
# FLOWER_BATCH_GATEWAY_MEMORY: 96m; the gateway idles at about 15 MiB and a 10 MB body, parsed
# whole, takes it past that), each once the gateway answers again, then runs the soak step.
# The floods are sent when the step makes its prompt (at run time: pre-flight only builds it).
FLOODING_FLOW = (
    soakjob.FLOW
    + """

import http.client, json, os, time
from urllib.parse import urlsplit


def _answers(url) -> bool:
    try:
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
        conn.request("GET", url.path.rstrip("/") + "/api/hello")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False


def flood(times: int) -> None:
    url = urlsplit(os.environ["ANTHROPIC_BASE_URL"])
    messages = [{"role": "user", "content": [{"type": "text", "text": "x" * 40}]}] * 125_000
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": messages}).encode()
    for _ in range(times):
        deadline = time.monotonic() + 120
        while not _answers(url) and time.monotonic() < deadline:
            time.sleep(0.2)
        try:
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
            conn.request("POST", url.path.rstrip("/") + "/v1/messages", body=body, headers={
                "x-api-key": os.environ["ANTHROPIC_API_KEY"], "content-type": "application/json"})
            conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            pass  # the gateway died reading it: what this flood is for
    deadline = time.monotonic() + 120
    while not _answers(url) and time.monotonic() < deadline:
        time.sleep(0.2)


def flooded_prompt(ctx):
    flood(int(os.environ.get("FLOODS", "1")))
    return ctx.get("prompt") or PROMPT


def main():
    return Workflow([Step("count", COUNTER, flooded_prompt)], name="soak")
"""
)


def _start_flooding(home: Path, tmp_path: Path, name: str, image_id: str, *, floods: int, turns: int):  # type: ignore[no-untyped-def]
    files = soakjob.write_project(tmp_path / name, leg=turns, handoff_at=None)
    files["flows"].write_text(FLOODING_FLOW)
    proc = fb_start(
        "run",
        files["workspace"],
        "-f",
        f"{files['flows']}:main",
        "--prompt",
        soakjob.PROMPT,
        "--scenario",
        files["scenario"],
        "--persistent",
        "--name",
        name,
        "--image",
        image_id,
        "--env",
        f"FLOODS={floods}",
        "--timeout",
        "10m",
        home=home,
        log=tmp_path / f"{name}.out",
    )
    return proc, Job(home, "adhoc", name), files


def test_a_gateway_oom_killed_is_restarted_and_the_record_names_the_oom(
    image_id: str, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWER_BATCH_GATEWAY_MEMORY", "96m")
    turns = 4
    proc, job, files = _start_flooding(
        home, tmp_path, f"oom-gw-{secrets.token_hex(2)}", image_id, floods=1, turns=turns
    )
    out = tmp_path / f"{job.job}.out"
    assert proc.wait(timeout=400) == 0, out.read_text()
    record = job.record()
    assert record["status"] == "passed", record
    health = record["gateway_health"]
    assert health["restarts"] == 1 and health["gave_up"] is None, health
    assert [(d["exit_code"], d["oom_killed"]) for d in health["deaths"]] == [(137, True)], health
    assert "gateway: the gateway was restarted 1×" in out.read_text() and "OOM-killed" in out.read_text()
    shown = fb("show", job.job, home=home)
    assert "OOM-killed (exit 137)" in shown.stdout, shown.stdout
    # the job went on after the restart, on the same gateway address, and was metered exactly
    assert (job.root / "workspace" / ".count").read_text().strip() == str(turns)
    log = job.gateway_log()
    expected = soakjob.expected_usage(files["scenario"], log)
    meter = json.loads((job.root / "logs" / "meter.json").read_text())
    assert expected.accepts(meter), (meter, expected)
    assert not leftovers(home, "adhoc"), leftovers(home, "adhoc").describe()


def test_a_gateway_oom_killed_again_and_again_ends_its_job_with_that_cause(
    image_id: str, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWER_BATCH_GATEWAY_MEMORY", "96m")
    monkeypatch.setenv("FLOWER_BATCH_GATEWAY_RESTARTS", "1")  # one restart, then give up
    proc, job, _ = _start_flooding(
        home, tmp_path, f"oom-dying-{secrets.token_hex(2)}", image_id, floods=3, turns=4
    )
    out = tmp_path / f"{job.job}.out"
    assert proc.wait(timeout=400) == 3, out.read_text()  # infrastructure: exit 3
    record = job.record()
    assert record["status"] == "error" and record["class"] == "infrastructure", record
    assert "kept dying" in record["reason"] and "OOM-killed (exit 137)" in record["reason"], record["reason"]
    health = record["gateway_health"]
    assert health["gave_up"] == record["reason"] and health["restarts"] == 1
    assert [(d["exit_code"], d["oom_killed"]) for d in health["deaths"]] == [(137, True), (137, True)], health
    assert not leftovers(home, "adhoc"), leftovers(home, "adhoc").describe()
