"""`flower-batch run --upstream URL` with a bearer token (ANTHROPIC_AUTH_TOKEN) end to end on
Docker: job container -> gateway container (token in its env only) -> a header-checking
upstream on the host (a LiteLLM stand-in) -> the scripted "real API"."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flower.scripted import MessagesServer
from tests.batch_fixtures.rig import Job, fb, leftovers, remove_resources, runtime_image
from tests.flower_batch.gateway.test_modes_on_docker import docker_host_ip
from tests.gateway_fixtures.header_check import HeaderCheckingUpstream
from tests.gateway_fixtures.upstream import PROJECT, Counting

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BEARER = "sk-litellm-test-DOCKER-" + "5" * 24


def test_run_with_a_bearer_token_and_upstream_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    image = runtime_image()
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    home = tmp_path / "home"
    home.mkdir()
    counting = Counting()
    expected = {"authorization": f"Bearer {BEARER}"}
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("FLOWER_BATCH_UPSTREAM", raising=False)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", BEARER)
    with (
        MessagesServer(counting) as inner,
        HeaderCheckingUpstream(inner.port, expected, host="0.0.0.0") as upstream,
    ):
        try:
            proc = fb("run", "tasks/hello", "--workflow", "flows.py:quick", "--prompt", "Read TASK.md and do what it asks.",
                      "--image", image, "--name", "bearer-1",
                      "--upstream", f"http://{docker_host_ip()}:{upstream.port}",
                      home=home, cwd=project, timeout=240)  # fmt: skip
        finally:
            remove_resources(leftovers(home, "adhoc"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = Job(home, "adhoc", "bearer-1").record()
    assert record["status"] == "passed" and record["gateway_mode"] == "anthropic"
    assert upstream.seen and all(seen == expected for seen in upstream.seen) and upstream.refused == 0
    assert counting.count == len(upstream.seen)
    for path in home.rglob("*"):  # the token is in no file of the batch, log or record
        if path.is_file():
            assert BEARER.encode() not in path.read_bytes(), path
