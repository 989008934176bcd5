"""How proxy mode authenticates to its upstream: an API key or a bearer token.

    the Anthropic API            x-api-key: <ANTHROPIC_API_KEY>
    LiteLLM and other gateways   Authorization: Bearer <ANTHROPIC_AUTH_TOKEN>

(the two variables the Claude CLI itself reads). The host reads them; the gateway container
gets the chosen one as a secret (a 0400 file on a tmpfs, named by env FB_UPSTREAM_KEY_FILE or
FB_UPSTREAM_TOKEN_FILE; in no environment, backend/secret_env.py), and never both: exactly one
credential goes upstream. Host-safe: no flower import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from flower_batch.errors import UpstreamError

HOST_KEY_ENV = "ANTHROPIC_API_KEY"
HOST_TOKEN_ENV = "ANTHROPIC_AUTH_TOKEN"
GATEWAY_KEY_ENV = "FB_UPSTREAM_KEY"
GATEWAY_TOKEN_ENV = "FB_UPSTREAM_TOKEN"
DEFAULT_UPSTREAM = "https://api.anthropic.com"  # the upstream unless --upstream names another


@dataclass(frozen=True)
class UpstreamAuth:
    scheme: str  # "x-api-key" or "bearer"
    secret: str = field(repr=False)  # never shown

    def headers(self) -> dict[str, str]:
        if self.scheme == "bearer":
            return {"authorization": f"Bearer {self.secret}"}
        return {"x-api-key": self.secret}

    def gateway_env(self) -> dict[str, str]:
        """The gateway container's secret for this credential (its name -> the value)."""
        return {GATEWAY_TOKEN_ENV if self.scheme == "bearer" else GATEWAY_KEY_ENV: self.secret}

    @classmethod
    def from_host(cls, environ: Mapping[str, str]) -> UpstreamAuth:
        """The host's credential: ANTHROPIC_AUTH_TOKEN (bearer) when set, else ANTHROPIC_API_KEY.

        The token wins because setting it is the deliberate choice of a gateway such as LiteLLM,
        while an API key is often just left in a shell's environment.
        """
        token = environ.get(HOST_TOKEN_ENV, "").strip()
        if token:
            return cls("bearer", token)
        key = environ.get(HOST_KEY_ENV, "").strip()
        if key:
            return cls("x-api-key", key)
        raise UpstreamError(
            f"gateway mode anthropic needs your API key in {HOST_KEY_ENV} (the Anthropic API) or a bearer "
            f"token in {HOST_TOKEN_ENV} (a gateway such as LiteLLM) on this host "
            "(only the gateway container gets it; jobs get per-job tokens)"
        )

    @classmethod
    def from_gateway(cls, environ: Mapping[str, str]) -> UpstreamAuth:
        """The credential inside the gateway container (what the host put there)."""
        token = environ.get(GATEWAY_TOKEN_ENV, "").strip()
        if token:
            return cls("bearer", token)
        key = environ.get(GATEWAY_KEY_ENV, "").strip()
        if key:
            return cls("x-api-key", key)
        raise UpstreamError(
            f"proxy mode needs the upstream credential in {GATEWAY_KEY_ENV} or {GATEWAY_TOKEN_ENV}"
        )


def upstream_problem(url: str) -> str | None:
    """Why `url` cannot be a proxy upstream, or None. Credentials in the URL are refused: the URL
    is printed and logged, a secret must travel as a secret."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"upstream {url!r}: expected a base URL like https://api.anthropic.com or http://litellm:4000"
    if parts.username or parts.password:
        return (
            f"upstream {parts.scheme}://…@{parts.hostname}: put the credential in {HOST_TOKEN_ENV} or "
            f"{HOST_KEY_ENV}, not in the URL (URLs are printed and logged)"
        )
    if parts.query or parts.fragment:
        return f"upstream {url!r}: give a base URL without ?query or #fragment"
    return None
