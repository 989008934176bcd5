"""The host side of the gateway's modes: what each needs from the host, and the promise that the
host side never imports flower or the SDK."""

from __future__ import annotations

import subprocess
import sys

import pytest

from flower_batch.errors import GatewayModeError
from flower_batch.gateway.host.setup import mode_setup
from flower_batch.gateway.upstream_auth import GATEWAY_KEY_ENV

# -- host side of the modes ----------------------------------------------------------------------


def test_anthropic_mode_needs_the_host_key_and_passes_it_by_env_only() -> None:
    with pytest.raises(GatewayModeError, match="ANTHROPIC_API_KEY"):
        mode_setup("anthropic", scenario_path=None, batch_budget_usd=None, environ={})
    setup = mode_setup(
        "anthropic",
        scenario_path=None,
        batch_budget_usd=1.5,
        environ={"ANTHROPIC_API_KEY": "sk-secret", "FLOWER_BATCH_UPSTREAM": "http://up:1"},
    )
    assert setup.env == {GATEWAY_KEY_ENV: "sk-secret"} and setup.egress
    assert "sk-secret" not in " ".join(setup.args) and "sk-secret" not in repr(setup)
    assert setup.args == ["--upstream", "http://up:1", "--batch-budget-usd", "1.5"]
    assert mode_setup("replay", scenario_path=None, batch_budget_usd=None, environ={}).args == []


def test_host_side_gateway_modules_do_not_load_the_sdk() -> None:
    # importing claude_agent_sdk (and mcp) costs ~1 s on every flower-batch command
    code = (
        "import sys, flower_batch.gateway.host.sidecar, flower_batch.gateway.host.usage, flower_batch.gateway.budget,"
        " flower_batch.gateway.metering, flower_batch.cli;"
        "print('claude_agent_sdk' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
