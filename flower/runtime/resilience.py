"""Riding out network outages: probe, classify, back off, resume.

A long run will meet a network outage. flower's answer has three parts:

* **Probe, don't ask.** `reachable()` is getaddrinfo plus one TCP handshake to the endpoint
  the CLI really talks to (`endpoint()` follows ``ANTHROPIC_BASE_URL``, so a gateway is probed,
  not api.anthropic.com). No HTTP, no credentials, no cost.
* **Wait for what passes, stop on what doesn't.** `classify()` sorts a failure text into
  "transient" (connection errors, 5xx, 429, overloaded, timeouts), "fatal" (bad key, budget,
  max turns, prompt too long, permission, 400 invalid request) or "unknown". Fatal is checked
  first: a 401 text often mentions "connection" too, and checking transient first would make
  a bad key wait for an hour.
* **Resume, don't restart.** When a session id exists the next attempt resumes it with
  `Resilience.resume_prompt`, a neutral "continue where you left off" that carries no error
  details (the model needs to know it was cut off, not whether it was ENOTFOUND or a 503).

How the two retry layers divide the work
----------------------------------------
The bundled CLI has its own retry loop: by default 10 retries, about 3 minutes, the same for
every error, including a 401 (fact sheet §5.3). It runs blind (no probe), every attempt writes a
``system/api_error`` entry into the transcript, and after 3 minutes it gives up anyway, which
is far short of a real outage. flower's layer knows more: it classifies (a bad key stops at
once), probes for free instead of sending requests, waits up to `max_offline_wait` (1 hour),
and resumes the same session.

So `Resilience.cli_env()` sets ``CLAUDE_CODE_MAX_RETRIES=2``: the CLI absorbs blips of a
couple of seconds inside the turn (2 retries = 3 requests in about 2 s), which keeps a
dropped packet from costing a resume, and everything longer surfaces quickly to flower,
which owns the long wait. A mid-stream cut is retried by the CLI regardless (one stream
retry, then a non-streaming fallback). With resilience disabled `cli_env()` returns ``{}``
so the CLI keeps its own default loop; nothing else would retry.

Measured on the real CLI 2.1.327 against the scripted server (tests/flower/runtime/test_resilience_on_the_cli.py):

* a 401 costs the CLI's 2 quick retries (3 HTTP requests, the CLI cannot tell a bad key from
  a blip) and then flower stops at once: 1 attempt, about 3 s including CLI start-up;
* a budget stop (``budget_exhausted``) is 1 request, 1 attempt;
* a 529 gets the CLI's 2 retries, then flower backs off and resumes the same session;
* an outage (listener closed, connections refused) of 4 s / 20 s: the CLI gives up after its
  2 retries, flower probes every `probe_interval` and the resumed request reaches the server
  about 1 s after the endpoint is back (5.0 s / 20.8 s after the outage began), in the same
  session, with no synthetic "API Error" in what the model sees;
* after `max_offline_wait` without a successful probe the step stops (it is not retried
  blind).

Everything time- or network-dependent (sleep, clock, rng, probe) is injectable so the policy
is testable without waiting.
"""

from __future__ import annotations

import random
import re
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

import anyio

from flower.catalogue.runtime import RESUME_PROMPT
from flower.errors import ConfigError
from flower.runtime.model_socket import SOCKET_ENV, reachable_socket

Kind = Literal["transient", "fatal", "unknown"]

DEFAULT_BASE_URL = "https://api.anthropic.com"


def reachable(host: str, port: int, timeout: float = 5.0, via: str | None = None) -> bool:
    """True if a TCP handshake with host:port succeeds within `timeout`.

    Name resolution plus a connect, then the socket is closed: no bytes are sent. Any
    exception (DNS failure, refusal, timeout, bad arguments) counts as unreachable. `via`: the
    model socket (FLOWER_MODEL_SOCKET) when host:port is only this process's relay to it; then
    the socket is asked.
    """
    if via:
        return reachable_socket(via, timeout)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except Exception:
        return False


def model_socket_of(env: Mapping[str, str]) -> str | None:
    """The model socket the CLI's requests are relayed to (FLOWER_MODEL_SOCKET in `env`), or None."""
    return env.get(SOCKET_ENV, "").strip() or None


def endpoint(env: Mapping[str, str]) -> tuple[str, int]:
    """(host, port) of the Messages API endpoint the CLI will call.

    Follows ``ANTHROPIC_BASE_URL`` from `env` (the environment the CLI gets); a path prefix is
    ignored. Default port 443 for https, 80 for http; a URL without a scheme is read as http.

    Raises:
        ValueError: the base URL has no host (or a non-numeric port).
    """
    url = (env.get("ANTHROPIC_BASE_URL") or "").strip() or DEFAULT_BASE_URL
    parts = urlsplit(url if "://" in url else "http://" + url)
    try:
        port = parts.port
    except ValueError:
        port = None
        host = None
    else:
        host = parts.hostname
    if not host:
        raise ConfigError(
            f"ANTHROPIC_BASE_URL={url!r} has no usable host[:port]; set it like https://api.anthropic.com"
        )
    if port is None:
        port = 443 if parts.scheme.lower() == "https" else 80
    return host, port


# --- classification ---------------------------------------------------------------------------

_FATAL_TEXT = re.compile(
    "|".join(
        [
            r"invalid api key",
            r"fix external api key",
            r"please run /login",
            r"authentication",
            r"unauthori[sz]ed",
            r"forbidden",
            r"oauth token (?:has )?(?:expired|been revoked|revoked)",
            r"credit balance",
            r"billing",
            r"budget",  # a gateway's budget refusal and the CLI's budget_exhausted alike
            r"max(?:imum)?[ _-]?(?:number of )?turns",
            r"prompt is too long",
            r"prompt_too_long",
            r"context (?:length|window) exceeded",
            r"permission",
            r"invalid[ _]request",
            r"not_found_error",
            r"model .{0,40}not (?:found|exist)",
            r"\b(?:400|401|403|404|413)\b",
        ]
    ),
    re.IGNORECASE,
)

_TRANSIENT_TEXT = re.compile(
    "|".join(
        [
            r"connection (?:refused|dropped|reset|error|closed|failed|timed out)",
            r"\bE(?:CONNREFUSED|CONNRESET|CONNABORTED|TIMEDOUT|NOTFOUND|AI_AGAIN|HOSTUNREACH|NETUNREACH|PIPE)\b",
            r"can't reach",
            r"socket hang up",
            r"fetch failed",
            r"network",
            r"time(?:d)? ?out",
            r"overloaded",
            r"rate[ _-]?limit",
            r"too many requests",
            r"server-side issue",
            r"internal server error",
            r"service unavailable",
            r"bad gateway",
            r"temporar(?:y|ily)",
            r"\b(?:408|429|5\d\d)\b",
        ]
    ),
    re.IGNORECASE,
)

# The CLI's result `terminal_reason` values that no retry can fix.
_FATAL_REASONS = frozenset(
    {
        "prompt_too_long",
        "blocking_limit",
        "max_turns",
        "budget_exhausted",
        "image_error",
        "malformed_tool_use_exhausted",
        "structured_output_retry_exhausted",
        "rapid_refill_breaker",
    }
)
_FATAL_STATUS = frozenset({400, 401, 402, 403, 404, 413, 422})


def classify(text: str | None) -> Kind:
    """Sort a failure text into "transient", "fatal" or "unknown" (fatal is checked first)."""
    text = text or ""
    if _FATAL_TEXT.search(text):
        return "fatal"
    if _TRANSIENT_TEXT.search(text):
        return "transient"
    return "unknown"


def classify_result(
    text: str | None, api_error_status: int | None = None, terminal_reason: str | None = None
) -> Kind:
    """`classify()` with the structured hints a result carries.

    Any fatal sign wins (text, HTTP status or terminal reason), so a gateway's budget refusal
    sent as 429 stays fatal. Otherwise a 408/429/5xx status or a transient text is transient.
    """
    by_text = classify(text)
    if by_text == "fatal" or terminal_reason in _FATAL_REASONS or api_error_status in _FATAL_STATUS:
        return "fatal"
    if api_error_status is not None and (api_error_status in (408, 429) or api_error_status >= 500):
        return "transient"
    return by_text


# --- policy -----------------------------------------------------------------------------------


@dataclass
class Resilience:
    """Retry policy for one step: attempts, backoff, offline waiting, resume prompt."""

    enabled: bool = True
    max_attempts: int = 6
    """Attempts in total, the first one included."""
    base_delay: float = 4.0
    max_delay: float = 120.0
    probe_timeout: float = 5.0
    probe_interval: float = 15.0
    max_offline_wait: float = 3600.0
    retry_unknown: bool = True
    resume_prompt: str = RESUME_PROMPT
    cli_max_retries: int = 2
    """CLAUDE_CODE_MAX_RETRIES handed to the CLI (see the module docstring)."""
    jitter: float = field(default=0.25, repr=False)

    @classmethod
    def from_value(cls, value: bool | Resilience) -> Resilience:
        """Accept a policy or a bool (which builds the default policy with enabled=bool).

        Raises:
            TypeError: anything else.
        """
        if isinstance(value, Resilience):
            return value
        if isinstance(value, bool):
            return cls(enabled=value)
        raise TypeError(f"resilience must be True, False or a Resilience, not {type(value).__name__}")

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based), jittered ±25%."""
        base: float = min(self.base_delay * 2 ** max(attempt - 1, 0), self.max_delay)
        factor: float = (rng or random).uniform(1 - self.jitter, 1 + self.jitter)
        return base * factor

    def should_retry(self, kind: Kind, attempt: int) -> bool:
        """Whether to try again after attempt number `attempt` (1-based) failed with `kind`."""
        if not self.enabled or attempt >= self.max_attempts:
            return False
        if kind == "fatal":
            return False
        return kind == "transient" or self.retry_unknown

    async def wait_online(
        self,
        *,
        env: Mapping[str, str],
        sleep: Callable[[float], Awaitable[object]] = anyio.sleep,
        probe: Callable[[str, int, float, str | None], bool] = reachable,
        clock: Callable[[], float] = time.monotonic,
    ) -> bool:
        """Probe `endpoint(env)` (or env's model socket) every `probe_interval` s until it
        answers (True) or `max_offline_wait` s have passed (False). The probe runs in a worker thread."""
        host, port = endpoint(env)
        via = model_socket_of(env)
        start = clock()
        while True:
            if await anyio.to_thread.run_sync(probe, host, port, self.probe_timeout, via):
                return True
            waited = clock() - start
            if waited >= self.max_offline_wait:
                return False
            await sleep(min(self.probe_interval, self.max_offline_wait - waited))

    def cli_env(self) -> dict[str, str]:
        """Environment for the CLI so it handles only short blips (empty when disabled)."""
        if not self.enabled:
            return {}
        return {"CLAUDE_CODE_MAX_RETRIES": str(self.cli_max_retries)}
