"""The gateway's three modes, each a Responder behind the same tap (budgets, meter, recording).

scripted   plays a scenario file (the offline model)
anthropic  forwards to an upstream Messages API with the host's key or token (proxy.py)
replay     re-serves each job's staged recording (replay.py)
"""

from __future__ import annotations

import os
from pathlib import Path

from flower.scripted import Responder, Scenario, ScriptedResponder
from flower_batch.errors import GatewayConfigError, UpstreamAuthError, UpstreamError
from flower_batch.gateway.budget import Budgets
from flower_batch.gateway.server.proxy import ProxyResponder, Upstream
from flower_batch.gateway.server.replay import ReplayResponder
from flower_batch.gateway.server.tap import Tap
from flower_batch.gateway.upstream_auth import DEFAULT_UPSTREAM, UpstreamAuth
from flower_batch.jobmodel.modes import MODES, mode_label


def mode_responder(
    mode: str,
    *,
    batch_dir: Path,
    scenario: str | None = None,
    upstream: str | None = None,
    environ: dict[str, str] | None = None,
) -> Responder:
    """The responder of one mode. Raises GatewayConfigError or ScenarioError."""
    environ = dict(os.environ) if environ is None else environ
    if mode == "scripted":
        if not scenario:
            raise GatewayConfigError("mode scripted needs --scenario FILE")
        return ScriptedResponder(Scenario.load(scenario))
    if mode == "anthropic":
        try:
            return ProxyResponder(Upstream(upstream or DEFAULT_UPSTREAM), UpstreamAuth.from_gateway(environ))
        except (UpstreamError, UpstreamAuthError) as err:
            raise GatewayConfigError(str(err)) from err
    if mode == "replay":
        return ReplayResponder(batch_dir)
    raise GatewayConfigError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")


def build_gateway(
    mode: str,
    *,
    batch_dir: Path,
    scenario: str | None = None,
    upstream: str | None = None,
    batch_budget_usd: float | None = None,
    environ: dict[str, str] | None = None,
) -> Tap:
    """The mode's responder behind the tap. Budgets apply in every mode (replay spends nothing)."""
    inner = mode_responder(mode, batch_dir=batch_dir, scenario=scenario, upstream=upstream, environ=environ)
    return Tap(inner, batch_dir=batch_dir, mode=mode, budgets=Budgets(batch_dir, batch_budget_usd))


def describe(mode: str, upstream: str | None) -> str:
    if mode == "anthropic":
        return f"{mode_label(mode)} via proxy {Upstream(upstream or DEFAULT_UPSTREAM).url}"
    return mode_label(mode)
