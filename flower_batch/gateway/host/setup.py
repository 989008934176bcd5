"""Host side of the gateway's modes: what the sidecar adds to the gateway container per mode.

Host-safe (no flower import): used by every flower-batch command that starts a gateway. The
modes themselves and their labels are the job model's (jobmodel/modes.py).

    anthropic  needs the host's credential: ANTHROPIC_API_KEY (sent as x-api-key) or
               ANTHROPIC_AUTH_TOKEN (sent as Authorization: Bearer, for LiteLLM and the like),
               handed to the gateway container only, as a secret (FB_UPSTREAM_KEY or
               FB_UPSTREAM_TOKEN: a 0400 file on a tmpfs, see upstream_auth.py), never to a job
               container, never to the host's disk. The gateway also gets a second, ordinary network with a route out
               (`egress`), while the jobs stay on the internal one. The upstream defaults to
               the real API; FLOWER_BATCH_UPSTREAM (or `--upstream URL`) overrides it.
    scripted   the scenario file, copied next to the gateway.
    replay     nothing: each replayed job's recording is staged in its own folder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field

from flower_batch.errors import GatewayModeError, UpstreamError
from flower_batch.gateway.upstream_auth import DEFAULT_UPSTREAM, UpstreamAuth, upstream_problem
from flower_batch.jobmodel.modes import MODES, GatewayMode, missing_need, parse_mode

UPSTREAM_ENV = "FLOWER_BATCH_UPSTREAM"


@dataclass
class ModeSetup:
    """Extra command-line arguments and environment for the gateway container of one mode."""

    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict, repr=False)  # may hold the host key: never print it
    egress: bool = False


def _anthropic(setup: ModeSetup, scenario_path: str | None, environ: Mapping[str, str]) -> None:
    try:
        auth = UpstreamAuth.from_host(environ)
    except UpstreamError as exc:
        raise GatewayModeError(str(exc)) from None
    upstream = environ.get(UPSTREAM_ENV, "").strip() or DEFAULT_UPSTREAM
    if problem := upstream_problem(upstream):
        raise GatewayModeError(f"{UPSTREAM_ENV}: {problem}")
    setup.args += ["--upstream", upstream]
    setup.env.update(auth.gateway_env())
    setup.egress = True


def _scripted(setup: ModeSetup, scenario_path: str | None, environ: Mapping[str, str]) -> None:
    if not scenario_path:
        raise GatewayModeError(f"gateway {missing_need(GatewayMode.SCRIPTED, None)}")
    setup.args += ["--scenario", scenario_path]


def _replay(setup: ModeSetup, scenario_path: str | None, environ: Mapping[str, str]) -> None:
    """Nothing: each replayed job's recording is staged in its own folder (running/runner.py)."""


# What each mode needs of the host: one entry per mode (its label and file: jobmodel/modes.py).
HOST_SETUP: dict[GatewayMode, Callable[[ModeSetup, str | None, Mapping[str, str]], None]] = {
    GatewayMode.ANTHROPIC: _anthropic,
    GatewayMode.SCRIPTED: _scripted,
    GatewayMode.REPLAY: _replay,
}


def mode_setup(
    mode: str,
    *,
    scenario_path: str | None,
    batch_budget_usd: float | None,
    environ: Mapping[str, str],
) -> ModeSetup:
    """`environ`: the host's (the credential, FLOWER_BATCH_UPSTREAM), handed down from where the
    process started (GatewaySettings), never read here."""
    known = parse_mode(mode)
    if known is None:
        raise GatewayModeError(f"gateway mode {mode!r} is unknown: use one of {', '.join(MODES)}")
    setup = ModeSetup()
    HOST_SETUP[known](setup, scenario_path, environ)
    if batch_budget_usd is not None:
        setup.args += ["--batch-budget-usd", repr(float(batch_budget_usd))]
    return setup


def use_upstream(url: str | None, environ: MutableMapping[str, str]) -> str | None:
    """`--upstream URL`: set it as FLOWER_BATCH_UPSTREAM in `environ`, the command's copy of the
    host's environment that its gateways are given (GatewaySettings; never os.environ).
    Returns what is wrong with it (nothing set then), or None."""
    if url is None:
        return None
    if problem := upstream_problem(url):
        return f"--upstream: {problem}"
    environ[UPSTREAM_ENV] = url.strip()
    return None


def mode_problem(mode: str, environ: Mapping[str, str]) -> str | None:
    """What the host lacks to start a gateway of `mode` (e.g. anthropic without the key), or None.
    Checked before a batch starts; scenario files are the jobs file's business."""
    try:
        mode_setup(mode, scenario_path="scenario", batch_budget_usd=None, environ=environ)
    except GatewayModeError as exc:
        return str(exc)
    return None
