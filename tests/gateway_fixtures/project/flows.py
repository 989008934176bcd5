"""Workflows of the gateway's Docker tests: a multi-step one with tools, a one-step one, and one
with a judge round (the judge says not_yet once, then achieved); `changed` is `careful` with
other instructions, to make a replay diverge."""

from __future__ import annotations

from flower import AgentSpec, Step, Workflow
from flower.starter.goal import parse_verdict

TOOLS = ["Read", "Write", "Edit", "Bash", "Glob", "Grep"]


def _worker(role: str, rules: str = "") -> AgentSpec:
    return AgentSpec(
        f"{role}-worker",
        instructions=f"ROLE: {role} worker. {rules}",
        allowed_tools=TOOLS,
        permission_mode="bypassPermissions",
        max_turns=20,
    )


def _prompt(ctx: dict) -> str:
    return ctx.get("prompt") or "Read TASK.md and do what it asks."


def careful() -> Workflow:
    spec = _worker("careful", "Run what you write before you say it is done.")
    return Workflow(
        [
            Step("do", spec, _prompt),
            Step(
                "verify",
                spec,
                "Verify the result against TASK.md once more. End with VERIFIED or FAILED.",
                resume_from="do",
                gate=lambda result, ctx: "VERIFIED" in result.text,
            ),
        ],
        name="careful",
    )


def changed() -> Workflow:
    spec = _worker("careful", "Run what you write before you say it is done. Be terse.")
    return Workflow([Step("do", spec, _prompt)], name="changed")


def quick() -> Workflow:
    return Workflow([Step("do", _worker("quick", "Be fast."), _prompt)], name="quick")


def judged() -> Workflow:
    judge = AgentSpec(
        "judge",
        instructions="ROLE: judge. Check the workspace against TASK.md and answer with a verdict.",
        allowed_tools=["Read", "Glob", "Grep"],
        permission_mode="bypassPermissions",
        max_turns=10,
    )
    return Workflow(
        [
            Step("work", _worker("judged"), _prompt),
            Step(
                "judge",
                judge,
                "Judge the result against TASK.md.",
                gate=lambda result, ctx: parse_verdict(result.text).achieved,
                retries=1,
                on_reject=lambda result, ctx: parse_verdict(result.text).feedback(),
            ),
        ],
        name="judged",
    )
