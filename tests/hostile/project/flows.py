"""The hostile job's workflow: one step whose agent runs the task's `attack.py` through Bash
(the scenario, hostile.toml, makes the call); the victim's step writes a marker and waits."""

from __future__ import annotations

from flower import AgentSpec, Step, Workflow

AGENT = AgentSpec(
    "hostile",
    instructions="Run what the task says.",
    allowed_tools=["Bash"],
    permission_mode="bypassPermissions",
    max_turns=4,
)


def attacker() -> Workflow:
    return Workflow([Step("attack", AGENT, "ATTACK: run attack.py")], name="attacker")


def victim() -> Workflow:
    return Workflow([Step("hold", AGENT, "VICTIM: keep the secret")], name="victim")
