"""Resilience policy: probe, endpoint, classification, backoff, offline waiting."""

from __future__ import annotations

import random
import socket

import pytest

from flower.catalogue.runtime import RESUME_PROMPT
from flower.runtime.resilience import Resilience, classify, classify_result, endpoint, reachable

# Final synthetic texts the real CLI 2.1.327 produced (fact sheet §5.2) and related texts.
CLI_ECONNREFUSED = "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)"
CLI_500 = (
    "API Error: 500 Internal server error. This is a server-side issue, usually temporary — try "
    "again in a moment. If it persists, check your inference gateway (127.0.0.1:40123)."
)
CLI_401 = "Invalid API key · Fix external API key"
CLI_529 = "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again."
CLI_ECONNRESET = (
    "API Error: Connection dropped (ECONNRESET). Check the gateway set in ANTHROPIC_BASE_URL, then try again."
)


# --- reachable / endpoint ---


def test_reachable_true_for_a_listening_port_and_sends_nothing():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        assert reachable("127.0.0.1", port, timeout=2.0)
        conn, _ = srv.accept()
        with conn:
            conn.settimeout(1.0)
            assert conn.recv(100) == b""  # the probe closed without sending a byte


def test_reachable_false_for_closed_port_bad_host_and_bad_args():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
    assert not reachable("127.0.0.1", port, timeout=1.0)
    assert not reachable("no-such-host.invalid", 443, timeout=1.0)
    assert not reachable("127.0.0.1", -5, timeout=1.0)


@pytest.mark.parametrize(
    "url, expected",
    [
        (None, ("api.anthropic.com", 443)),
        ("", ("api.anthropic.com", 443)),
        ("https://gw.example.com", ("gw.example.com", 443)),
        ("http://gw.example.com", ("gw.example.com", 80)),
        ("http://127.0.0.1:18088/tenant-a", ("127.0.0.1", 18088)),
        ("https://gw.example.com:8443/v1/x?y=1", ("gw.example.com", 8443)),
        ("127.0.0.1:9000", ("127.0.0.1", 9000)),
        ("http://[::1]:7000", ("::1", 7000)),
    ],
)
def test_endpoint_follows_base_url(url, expected):
    env = {} if url is None else {"ANTHROPIC_BASE_URL": url}
    assert endpoint(env) == expected


def test_the_probe_follows_the_environment_the_cli_gets(tmp_path):
    """The process's environment (as the command read it), then the runtime's env, then the spec's."""
    from flower.runtime.engine import Runtime
    from flower.spec import AgentSpec

    rt = Runtime(
        workspace=tmp_path, run_dir=tmp_path / "runs", environ={"ANTHROPIC_BASE_URL": "http://10.1.2.3:4567"}
    )
    assert endpoint(rt.cli_environment(AgentSpec("x"))) == ("10.1.2.3", 4567)
    rt.env["ANTHROPIC_BASE_URL"] = "http://10.9.9.9:80"
    assert endpoint(rt.cli_environment(AgentSpec("x"))) == ("10.9.9.9", 80)
    spec = AgentSpec("x", env={"ANTHROPIC_BASE_URL": "http://spec.local:81"})
    assert endpoint(rt.cli_environment(spec)) == ("spec.local", 81)


def test_endpoint_rejects_url_without_host():
    with pytest.raises(ValueError, match="ANTHROPIC_BASE_URL"):
        endpoint({"ANTHROPIC_BASE_URL": "http://:80"})
    with pytest.raises(ValueError, match="ANTHROPIC_BASE_URL"):
        endpoint({"ANTHROPIC_BASE_URL": "http://host:notaport"})


# --- classify ---


@pytest.mark.parametrize(
    "text",
    [
        CLI_ECONNREFUSED,
        CLI_500,
        CLI_529,
        CLI_ECONNRESET,
        "API Error: Can't reach the API server — check your internet or DNS (ENOTFOUND)",
        "429 Too Many Requests",
        "rate_limit_error: slow down",
        "Overloaded",
        "Request timed out.",
        "socket timeout after 600s",
        "502 Bad Gateway",
    ],
)
def test_transient_texts(text):
    assert classify(text) == "transient"


@pytest.mark.parametrize(
    "text",
    [
        CLI_401,
        "API Error: 401 Invalid API key · Please run /login",
        # fatal is checked first: an auth failure that also mentions a connection problem
        "authentication_error: connection rejected, invalid x-api-key (ECONNRESET)",
        "Gateway: budget exhausted for this job (429)",
        "Reached maximum budget ($0.50)",
        "Error: Reached max turns (12)",
        "Prompt is too long: 210000 tokens > 200000 maximum",
        "API Error: 400 duplicate tool_use ID in conversation history.",
        "invalid_request_error: messages.1: unexpected role",
        "Credit balance is too low",
        "403 Forbidden",
        "permission denied for model",
    ],
)
def test_fatal_texts(text):
    assert classify(text) == "fatal"


@pytest.mark.parametrize("text", ["", None, "something odd happened", "API Error: Request was aborted."])
def test_unknown_texts(text):
    assert classify(text) == "unknown"


def test_numbers_inside_longer_numbers_do_not_count():
    assert classify("listening on 127.0.0.1:40100, retry in 4000ms") == "unknown"


def test_classify_result_uses_structured_hints():
    assert classify_result("API Error", api_error_status=500) == "transient"
    assert classify_result("", api_error_status=529) == "transient"
    assert classify_result(None, api_error_status=429) == "transient"
    assert classify_result("weird", api_error_status=401) == "fatal"
    assert classify_result("Connection refused", api_error_status=401) == "fatal"
    assert classify_result("budget exceeded", api_error_status=429) == "fatal"
    assert classify_result("", terminal_reason="max_turns") == "fatal"
    assert classify_result("", terminal_reason="prompt_too_long") == "fatal"
    assert classify_result(CLI_ECONNREFUSED, terminal_reason="api_error") == "transient"
    assert classify_result("odd", terminal_reason="api_error") == "unknown"


# --- policy ---


def test_defaults_match_upstream():
    r = Resilience()
    assert (r.enabled, r.max_attempts, r.base_delay, r.max_delay) == (True, 6, 4.0, 120.0)
    assert (r.probe_timeout, r.probe_interval, r.max_offline_wait, r.retry_unknown) == (
        5.0,
        15.0,
        3600.0,
        True,
    )
    assert r.resume_prompt == RESUME_PROMPT


def test_resume_prompt_carries_no_error_details():
    low = RESUME_PROMPT.lower()
    for word in ("error", "api", "econn", "503", "401", "network", "错误", "网络"):
        assert word not in low
    assert len(RESUME_PROMPT) < 200


def test_from_value():
    assert Resilience.from_value(True) == Resilience(enabled=True)
    assert Resilience.from_value(False).enabled is False
    custom = Resilience(max_attempts=2)
    assert Resilience.from_value(custom) is custom
    with pytest.raises(TypeError, match="resilience"):
        Resilience.from_value("yes")  # type: ignore[arg-type]


def test_delay_doubles_caps_and_jitters_within_25_percent():
    r = Resilience()
    rng = random.Random(7)
    for attempt, base in [(1, 4.0), (2, 8.0), (3, 16.0), (5, 64.0), (6, 120.0), (20, 120.0)]:
        samples = [r.delay(attempt, rng) for _ in range(200)]
        assert all(base * 0.75 <= s <= base * 1.25 for s in samples)
        assert max(samples) - min(samples) > base * 0.3  # really jittered


class _Edge:
    def __init__(self, value):
        self.value = value

    def uniform(self, a, b):
        return a if self.value == "low" else b


def test_delay_jitter_bounds_exact():
    r = Resilience()
    assert r.delay(2, _Edge("low")) == pytest.approx(6.0)
    assert r.delay(2, _Edge("high")) == pytest.approx(10.0)


def test_should_retry():
    r = Resilience()
    assert r.should_retry("transient", 1)
    assert r.should_retry("transient", 5)
    assert not r.should_retry("transient", 6)  # six attempts in total, the first included
    assert not r.should_retry("fatal", 1)
    assert r.should_retry("unknown", 1)
    assert not Resilience(retry_unknown=False).should_retry("unknown", 1)
    assert not Resilience(enabled=False).should_retry("transient", 1)


def test_cli_env_divides_the_work():
    assert Resilience().cli_env() == {"CLAUDE_CODE_MAX_RETRIES": "2"}
    assert Resilience(cli_max_retries=0).cli_env() == {"CLAUDE_CODE_MAX_RETRIES": "0"}
    assert Resilience(enabled=False).cli_env() == {}  # the CLI keeps its own default loop


class _FakeTime:
    def __init__(self):
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self):
        return self.now

    async def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.mark.anyio
async def test_wait_online_probes_until_reachable():
    t = _FakeTime()
    seen = []

    def probe(host, port, timeout, via):
        seen.append((host, port, timeout))
        assert via is None
        return len(seen) >= 4

    env = {"ANTHROPIC_BASE_URL": "http://gw.local:8080/p"}
    ok = await Resilience().wait_online(env=env, sleep=t.sleep, probe=probe, clock=t.clock)
    assert ok
    assert seen == [("gw.local", 8080, 5.0)] * 4
    assert t.sleeps == [15.0, 15.0, 15.0]


@pytest.mark.anyio
async def test_wait_online_gives_up_after_max_offline_wait():
    t = _FakeTime()
    probes = []

    def probe(host, port, timeout, via):
        probes.append(t.now)
        return False

    r = Resilience(probe_interval=15.0, max_offline_wait=40.0)
    ok = await r.wait_online(env={}, sleep=t.sleep, probe=probe, clock=t.clock)
    assert not ok
    assert t.sleeps == [15.0, 15.0, 10.0]  # never sleeps past the deadline
    assert t.now - 1000.0 == pytest.approx(40.0)
    assert len(probes) == 4  # the last probe happens exactly at the deadline


@pytest.mark.anyio
async def test_wait_online_real_probe_against_local_listener():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        env = {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{srv.getsockname()[1]}"}
        assert await Resilience(probe_timeout=1.0).wait_online(env=env)
