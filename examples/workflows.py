"""Two workflow variants the demo matrix compares (examples/jobs.toml).

`careful` does the task, then a second step continues the same session to verify the result.
`quick` does the task in one step and stops. The job's prompt arrives as ctx["prompt"]
(`flower run --prompt`, set by flower-batch from jobs.toml).
"""

from __future__ import annotations

from flower import AgentSpec, Step, Workflow

TOOLS = ["Read", "Write", "Edit", "Bash", "Glob", "Grep"]
DEFAULT_PROMPT = "Read TASK.md and do what it asks."


def _worker(style: str, rules: str) -> AgentSpec:
    return AgentSpec(
        f"{style}-worker",
        instructions=f"ROLE: {style} worker. {rules}",
        allowed_tools=TOOLS,
        permission_mode="bypassPermissions",
        max_turns=20,
    )


def _prompt(ctx: dict) -> str:
    return ctx.get("prompt") or DEFAULT_PROMPT


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


def quick() -> Workflow:
    return Workflow([Step("do", _worker("quick", "Be fast."), _prompt)], name="quick")
