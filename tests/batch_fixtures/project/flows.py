"""Workflows of the batch Docker tests (shipped into each job's /flows by flower-batch).

`solo` does the task in one step; `duo` adds a review step that continues the same session.
The job's prompt arrives as ctx["prompt"].
"""

from __future__ import annotations

from flower import AgentSpec, Step, Workflow

WORKER = AgentSpec(
    "test-worker",
    instructions="ROLE: test worker.",
    allowed_tools=["Read", "Write", "Bash"],
    permission_mode="bypassPermissions",
    max_turns=8,
)


def _prompt(ctx: dict) -> str:
    return ctx.get("prompt") or "Read TASK.md and do what it asks."


def solo() -> Workflow:
    return Workflow([Step("do", WORKER, _prompt)], name="solo")


def duo() -> Workflow:
    return Workflow(
        [
            Step("do", WORKER, _prompt),
            Step(
                "review",
                WORKER,
                "Review answer.txt once more. Say CHECKED when it is right.",
                resume_from="do",
                gate=lambda result, ctx: "CHECKED" in result.text,
            ),
        ],
        name="duo",
    )
