"""The gateway's three modes, each a Responder behind the same tap (budgets, meter, recording).

scripted   plays a scenario file (the offline model)
anthropic  forwards to an upstream Messages API with the host's key or token (proxy.py)
replay     re-serves each job's staged recording (replay.py)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from flower.scripted import Responder, Scenario, ScriptedResponder
from flower_batch.errors import GatewayConfigError, UpstreamError
from flower_batch.gateway.budget import Budgets
from flower_batch.gateway.server.proxy import ProxyResponder, Upstream
from flower_batch.gateway.server.replay import ReplayResponder
from flower_batch.gateway.server.tap import Tap
from flower_batch.gateway.upstream_auth import DEFAULT_UPSTREAM, UpstreamAuth
from flower_batch.jobmodel.modes import MODES, GatewayMode, missing_need, mode_label, parse_mode


@dataclass(frozen=True)
class Serve:
    """What `serve` was given: each mode's responder takes what it needs of it."""

    batch_dir: Path
    scenario: str | None
    upstream: str | None
    environ: Mapping[str, str]  # the gateway process's: its credential (FB_UPSTREAM_KEY / _TOKEN)


def _scripted(serve: Serve) -> Responder:
    if not serve.scenario:
        raise GatewayConfigError(f"{missing_need(GatewayMode.SCRIPTED, None)}: pass --scenario FILE")
    return ScriptedResponder(Scenario.load(serve.scenario))


def _anthropic(serve: Serve) -> Responder:
    try:
        return ProxyResponder(
            Upstream(serve.upstream or DEFAULT_UPSTREAM), UpstreamAuth.from_gateway(serve.environ)
        )
    except UpstreamError as err:
        raise GatewayConfigError(str(err)) from err


def _replay(serve: Serve) -> Responder:
    return ReplayResponder(serve.batch_dir)


def _via_proxy(upstream: str | None) -> str:
    return f" via proxy {Upstream(upstream or DEFAULT_UPSTREAM).url}"


# Each mode's responder, and what its ready line adds to the mode's label: one entry per mode.
RESPONDERS: dict[GatewayMode, tuple[Callable[[Serve], Responder], Callable[[str | None], str]]] = {
    GatewayMode.SCRIPTED: (_scripted, lambda upstream: ""),
    GatewayMode.ANTHROPIC: (_anthropic, _via_proxy),
    GatewayMode.REPLAY: (_replay, lambda upstream: ""),
}


def mode_responder(
    mode: str,
    *,
    batch_dir: Path,
    scenario: str | None = None,
    upstream: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Responder:
    """The responder of one mode. Raises GatewayConfigError or ScenarioError. `environ`: the
    gateway process's, handed down from its entry (__main__.py); none: no credential."""
    known = parse_mode(mode)
    if known is None:
        raise GatewayConfigError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    build, _ = RESPONDERS[known]
    return build(Serve(Path(batch_dir), scenario, upstream, {} if environ is None else environ))


def build_gateway(
    mode: str,
    *,
    batch_dir: Path,
    scenario: str | None = None,
    upstream: str | None = None,
    batch_budget_usd: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> Tap:
    """The mode's responder behind the tap. Budgets apply in every mode (replay spends nothing)."""
    inner = mode_responder(mode, batch_dir=batch_dir, scenario=scenario, upstream=upstream, environ=environ)
    return Tap(
        inner, batch_dir=batch_dir, mode=GatewayMode(mode), budgets=Budgets(batch_dir, batch_budget_usd)
    )


def describe(mode: str, upstream: str | None) -> str:
    known = parse_mode(mode)
    return mode_label(mode) + (RESPONDERS[known][1](upstream) if known else "")
