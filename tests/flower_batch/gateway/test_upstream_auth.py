"""Proxy mode's upstream credential: x-api-key for the Anthropic API (ANTHROPIC_API_KEY), or
`Authorization: Bearer` for LiteLLM-style gateways (ANTHROPIC_AUTH_TOKEN), checked by a local
upstream that refuses any other header, in-process with the real gateway pieces.

    job (per-job token) -> gateway: JobRouter -> Tap -> ProxyResponder -> HeaderCheckingUpstream
                                                                          -> MessagesServer(Counting)
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from flower.scripted import MessagesServer
from flower_batch.errors import GatewayConfigError, GatewayModeError, UpstreamError
from flower_batch.gateway.host.setup import mode_setup, use_upstream
from flower_batch.gateway.server.responders import build_gateway
from flower_batch.gateway.server.routing import JobRouter, PerJobLog
from flower_batch.gateway.tokens import job_token, new_secret
from flower_batch.gateway.upstream_auth import UpstreamAuth
from tests.gateway_fixtures.header_check import HeaderCheckingUpstream
from tests.gateway_fixtures.upstream import Counting

REPO = Path(__file__).resolve().parents[3]
FLOWER = REPO / ".venv" / "bin" / "flower"
API_KEY = "sk-ant-test-APIKEY-" + "4" * 24
BEARER = "sk-litellm-test-TOKEN-" + "9" * 24
HI = {
    "rules": [
        {
            "name": "hi",
            "reply": [{"text": "hello from upstream"}],
            "reply_model": "{model}",
            "usage": {"input_tokens": 12, "output_tokens": 3},
        }
    ]
}
MODEL = "claude-sonnet-4-5"


# -- which credential, from which variable ---------------------------------------------------------


def test_the_host_credential_is_a_bearer_token_or_an_api_key() -> None:
    assert UpstreamAuth.from_host({"ANTHROPIC_API_KEY": API_KEY}).headers() == {"x-api-key": API_KEY}
    bearer = UpstreamAuth.from_host({"ANTHROPIC_AUTH_TOKEN": BEARER, "ANTHROPIC_API_KEY": API_KEY})
    assert bearer.headers() == {"authorization": f"Bearer {BEARER}"}  # the deliberate choice wins
    assert bearer.gateway_env() == {"FB_UPSTREAM_TOKEN": BEARER}  # one credential, never both
    assert BEARER not in repr(bearer)
    with pytest.raises(UpstreamError, match="ANTHROPIC_API_KEY .* or a bearer token in ANTHROPIC_AUTH_TOKEN"):
        UpstreamAuth.from_host({"ANTHROPIC_API_KEY": "  "})
    assert UpstreamAuth.from_gateway({"FB_UPSTREAM_TOKEN": BEARER}).scheme == "bearer"
    assert UpstreamAuth.from_gateway({"FB_UPSTREAM_KEY": API_KEY}).scheme == "x-api-key"


def test_mode_setup_hands_the_gateway_exactly_the_chosen_credential() -> None:
    setup = mode_setup(
        "anthropic",
        scenario_path=None,
        batch_budget_usd=None,
        environ={
            "ANTHROPIC_AUTH_TOKEN": BEARER,
            "ANTHROPIC_API_KEY": API_KEY,
            "FLOWER_BATCH_UPSTREAM": "http://litellm:4000/anthropic",
        },
    )
    assert setup.env == {"FB_UPSTREAM_TOKEN": BEARER} and setup.egress
    assert setup.args == ["--upstream", "http://litellm:4000/anthropic"]
    assert BEARER not in repr(setup) and API_KEY not in repr(setup)
    with pytest.raises(GatewayModeError, match="not in the URL"):
        mode_setup(
            "anthropic",
            scenario_path=None,
            batch_budget_usd=None,
            environ={"ANTHROPIC_AUTH_TOKEN": BEARER, "FLOWER_BATCH_UPSTREAM": "https://me:pw@litellm"},
        )
    with pytest.raises(GatewayModeError, match="FLOWER_BATCH_UPSTREAM: upstream 'litellm:4000'"):
        mode_setup(
            "anthropic",
            scenario_path=None,
            batch_budget_usd=None,
            environ={"ANTHROPIC_API_KEY": API_KEY, "FLOWER_BATCH_UPSTREAM": "litellm:4000"},
        )


def test_the_upstream_option_sets_the_variable_only_when_usable() -> None:
    environ: dict[str, str] = {}
    assert use_upstream(None, environ) is None and environ == {}
    assert use_upstream("ftp://nope", environ) == (
        "--upstream: upstream 'ftp://nope': expected a base URL like https://api.anthropic.com or http://litellm:4000"
    )
    assert environ == {}
    assert use_upstream(" https://llm.example.com/v2 ", environ) is None
    assert environ == {"FLOWER_BATCH_UPSTREAM": "https://llm.example.com/v2"}


def test_the_gateway_refuses_to_start_without_a_credential(tmp_path: Path) -> None:
    with pytest.raises(GatewayConfigError, match="FB_UPSTREAM_KEY or FB_UPSTREAM_TOKEN"):
        build_gateway("anthropic", batch_dir=tmp_path, upstream="http://127.0.0.1:9", environ={})


# -- through the gateway to a header-checking upstream ---------------------------------------------


def _gateway(batch: Path, upstream: str, environ: dict[str, str], secret: str) -> MessagesServer:
    tap = build_gateway("anthropic", batch_dir=batch, upstream=upstream, environ=environ)
    server = MessagesServer(JobRouter(tap, secret))
    server.log = PerJobLog(batch)  # type: ignore[assignment]
    return server


def _ask(gateway: MessagesServer, secret: str, job: str, *, stream: bool) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
    body = json.dumps(
        {
            "model": MODEL,
            "max_tokens": 20,
            "stream": stream,
            "messages": [{"role": "user", "content": "say hi"}],
        }
    )
    conn.request(
        "POST",
        f"/j/{job}/v1/messages",
        body,
        {
            "x-api-key": job_token(secret, job),
            "anthropic-version": "2023-06-01",
            "content-type": "application/json",
        },
    )
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data


CASES = {
    "anthropic-api": ({"FB_UPSTREAM_KEY": API_KEY}, {"x-api-key": API_KEY}),
    "litellm-bearer": ({"FB_UPSTREAM_TOKEN": BEARER}, {"authorization": f"Bearer {BEARER}"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_credential_reaches_the_upstream_in_its_header_and_nothing_else(
    case: str, tmp_path: Path
) -> None:
    gateway_env, expected = CASES[case]
    secret = new_secret()
    counting = Counting(HI)
    with (
        MessagesServer(counting) as inner,
        HeaderCheckingUpstream(inner.port, expected) as upstream,
        _gateway(tmp_path, upstream.base_url, gateway_env, secret) as gateway,
    ):
        plain = _ask(gateway, secret, "job-a", stream=False)
        streamed = _ask(gateway, secret, "job-a", stream=True)
    assert plain[0] == 200 and json.loads(plain[1])["content"][0]["text"] == "hello from upstream", plain
    assert (
        streamed[0] == 200 and b"event: message_stop" in streamed[1] and b"hello from upstream" in streamed[1]
    )
    assert upstream.seen == [expected, expected] and upstream.refused == 0
    assert len(counting.credentials) == 2  # both went on to the model
    logs = "".join(p.read_text() for p in (tmp_path / "job-a" / "logs").iterdir() if p.is_file())
    assert API_KEY not in logs and BEARER not in logs and job_token(secret, "job-a") not in logs


def test_the_wrong_kind_of_credential_is_refused_by_the_upstream(tmp_path: Path) -> None:
    # a LiteLLM-style upstream wants a bearer token; the gateway was given an API key
    secret = new_secret()
    counting = Counting(HI)
    expected = {"authorization": f"Bearer {BEARER}"}
    with (
        MessagesServer(counting) as inner,
        HeaderCheckingUpstream(inner.port, expected) as upstream,
        _gateway(tmp_path, upstream.base_url, {"FB_UPSTREAM_KEY": BEARER}, secret) as gateway,
    ):
        status, body = _ask(gateway, secret, "job-b", stream=False)
    assert status == 401 and json.loads(body)["error"]["type"] == "authentication_error"
    assert upstream.seen == [{"x-api-key": BEARER}] and counting.credentials == []


@pytest.mark.slow
def test_a_real_flower_run_through_a_bearer_upstream(tmp_path: Path) -> None:
    """The real SDK + CLI as the job: every request of a multi-step workflow reaches the upstream
    with the bearer token, none with an x-api-key, and the run succeeds."""
    counting = Counting(REPO / "examples" / "scenarios" / "demo.toml")
    secret = new_secret()
    expected = {"authorization": f"Bearer {BEARER}"}
    ws, runs = tmp_path / "workspace", tmp_path / "runs"
    shutil.copytree(REPO / "examples" / "tasks" / "fizzbuzz", ws)
    with (
        MessagesServer(counting) as inner,
        HeaderCheckingUpstream(inner.port, expected) as upstream,
        _gateway(tmp_path / "batch", upstream.base_url, {"FB_UPSTREAM_TOKEN": BEARER}, secret) as gateway,
    ):
        env: dict[str, Any] = {
            **os.environ,
            **gateway.env(runs / ".claude", prefix="/j/job-c"),
            "ANTHROPIC_API_KEY": job_token(secret, "job-c"),
            "ANTHROPIC_MODEL": MODEL,
        }
        env.pop("ANTHROPIC_AUTH_TOKEN", None)
        proc = subprocess.run(
            [str(FLOWER), "-w", str(ws), "-r", str(runs), "run", "examples/workflows.py:careful", "--fresh",
             "--prompt", "Read TASK.md and do what it asks. Run the program once to check it."],
            env=env, capture_output=True, text=True, timeout=180, cwd=REPO,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(counting.usages) == 5 and upstream.refused == 0
    assert upstream.seen and all(seen == expected for seen in upstream.seen)
