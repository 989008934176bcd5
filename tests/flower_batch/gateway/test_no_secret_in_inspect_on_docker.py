"""No secret in any `docker inspect` on the local backend (issue 21 item 7): a proxy-mode job
with a `--secret`, and while it runs, the inspect output of every container of its batch (the
gateway and the job) is searched for every secret value: the host's API key, the job's own
secret, the batch secret and the job's gateway token. Each is a 0400 file on a tmpfs in its
container (docker/secret_handover.py); the gateway's processes hold none in their environment;
and the home (the host's disk) holds none when the job is done.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower.scripted import MessagesServer
from tests.batch_fixtures.rig import (
    BATCH,
    LEASE,
    MANAGED,
    ROLE,
    Job,
    fb_start,
    leftovers,
    private_home,
    runtime_image,
    wait_for,
)
from tests.flower_batch.gateway.test_modes_on_docker import PROMPT, docker_host_ip
from tests.gateway_fixtures.upstream import PROJECT, SCENARIO, Counting

pytestmark = [pytest.mark.docker, pytest.mark.slow]

HOST_KEY = "sk-ant-test-HOSTKEY-" + secrets.token_hex(12)
JOB_SECRET = "fbsecret-" + secrets.token_hex(16)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield from private_home(tmp_path)


@pytest.fixture
def upstream(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counting]:
    """The tests' "real API", its slow answer slowed down: the job runs long enough to inspect."""
    scenario = tomllib.loads(SCENARIO.read_text())
    for rule in scenario["rules"]:
        if rule.get("name") == "slow":
            rule["chunk_delay_s"] = 2.0
    counting = Counting(scenario)
    server = MessagesServer(counting, host="0.0.0.0").start()
    monkeypatch.setenv("ANTHROPIC_API_KEY", HOST_KEY)
    monkeypatch.setenv("FLOWER_BATCH_UPSTREAM", f"http://{docker_host_ip()}:{server.port}")
    monkeypatch.setenv("FB_TEST_SECRET", JOB_SECRET)
    try:
        yield counting
    finally:
        server.stop()


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout


def containers_of(session: str) -> dict[str, str]:
    """Role -> id of every container of the batch's orchestrator session (the job's lease)."""
    ids = docker(
        "ps", "-q", "--no-trunc", "--filter", f"label={MANAGED}=1", "--filter", f"label={BATCH}=adhoc",
        "--filter", f"label={LEASE}={session}",
    ).split()  # fmt: skip
    return {json.loads(docker("inspect", c))[0]["Config"]["Labels"][ROLE]: c for c in ids}


def in_tmpfs(container: str, path: str) -> str:
    """The secret file's mode, checked to be on the tmpfs at /run/secrets; returns its content."""
    mounts = docker("exec", container, "cat", "/proc/mounts").splitlines()
    assert any(line.split()[1:3] == ["/run/secrets", "tmpfs"] for line in mounts), mounts
    assert docker("exec", container, "stat", "-c", "%a", path).strip() == "400"
    return docker("exec", container, "cat", path)


def test_no_secret_in_the_inspect_of_any_container_of_a_batch(
    image_id_for_secrets: str, home: Path, upstream: Counting, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    name = f"sealed-{secrets.token_hex(2)}"
    proc = fb_start(
        "run", "tasks/slow", "--workflow", "flows.py:quick", "--prompt", PROMPT, "--image",
        image_id_for_secrets, "--name", name, "--secret", "FB_TEST_SECRET", home=home, cwd=project,
        log=tmp_path / "run.log",
    )  # fmt: skip
    job = Job(home, "adhoc", name)
    meter = job.root / "logs" / "meter.jsonl"
    wait_for(
        "the slow answer to stream", lambda: meter.exists() and '"input_tokens":9000' in meter.read_text()
    )
    session = job.record()["session"]
    found = containers_of(session)
    assert set(found) == {"gateway", "job"}, found
    gateway, job_container = found["gateway"], found["job"]

    batch_secret = in_tmpfs(gateway, "/run/secrets/FB_GATEWAY_SECRET")
    assert in_tmpfs(gateway, "/run/secrets/FB_UPSTREAM_KEY") == HOST_KEY
    token = in_tmpfs(job_container, "/run/secrets/ANTHROPIC_API_KEY")
    assert token.startswith("fbj-") and len(batch_secret) == 64
    assert in_tmpfs(job_container, "/run/secrets/FB_TEST_SECRET") == JOB_SECRET
    values = {"host key": HOST_KEY, "job secret": JOB_SECRET, "batch secret": batch_secret, "token": token}

    for role, container in found.items():
        shown = docker("inspect", container)
        leaked = [what for what, value in values.items() if value in shown]
        assert not leaked, f"`docker inspect` of the {role} container shows the {', '.join(leaked)}"
    # the gateway reads its secrets from the files: none is in any of its processes' environment
    environs = docker("exec", gateway, "sh", "-c", "cat /proc/[0-9]*/environ")
    assert not [what for what, value in values.items() if value in environs]
    # the job gets its token and its secret as env, as the CLI and the workflow expect
    job_env = docker("exec", job_container, "sh", "-c", "cat /proc/[0-9]*/environ 2>/dev/null")
    assert f"ANTHROPIC_API_KEY={token}" in job_env and f"FB_TEST_SECRET={JOB_SECRET}" in job_env

    assert proc.wait(timeout=240) == 0, (tmp_path / "run.log").read_text()[-3000:]
    assert upstream.count >= 2  # the job's answers came through the proxy, with the host's key
    # ... and no secret is on the host's disk: in no file of the home
    files = [p for p in home.rglob("*") if p.is_file()]
    assert len(files) > 10
    for what, value in values.items():
        assert not [p for p in files if value.encode() in p.read_bytes()], what
    assert not leftovers(home, "adhoc"), leftovers(home, "adhoc").describe()


@pytest.fixture(scope="module")
def image_id_for_secrets() -> str:
    return runtime_image()
