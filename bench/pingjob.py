"""The one-step job every benchmark runs: a workflow that asks "ping" and a scripted model that
answers "pong" — the smallest real job (one CLI start, one model turn, one manifest row) — and
the `docker run` of it by hand that the benches compare flower-batch with."""

from __future__ import annotations

from collections.abc import Sequence

FLOW = """
from flower import AgentSpec, Step, Workflow

def main():
    return Workflow([Step("ping", AgentSpec("pinger", permission_mode="bypassPermissions"), "ping")])
"""
SCENARIO = """
[[rules]]
name = "pong"
when = { last_user_contains = "ping" }
reply = [{ text = "pong" }]
"""


def raw_command(
    image: str, job: str, flows: str, port: int, user: str, module: str, extra_env: Sequence[str] = ()
) -> list[str]:
    """The baseline both benches time: `docker run` of the job's own flower command by hand, as
    `user` (the uid flower-batch runs a job as, for the same job), model on the host network,
    `job` holding workspace/ and runs/, `flows` the workflow module's folder. /tmp (HOME) is a
    tmpfs as in a flower-batch job: on the container's own layer (fuse-overlayfs here) the CLI's
    writes to HOME cost the baseline CPU that has nothing to do with orchestration."""
    mounts = [f"{job}/workspace:/workspace", f"{job}/runs:/runs", f"{flows}:/flows:ro"]
    env = [
        f"ANTHROPIC_BASE_URL=http://127.0.0.1:{port}",
        "ANTHROPIC_API_KEY=bench",
        "CLAUDE_CONFIG_DIR=/runs/.claude",
        "HOME=/tmp",
        "FLOWER_PATH=/flows",
        *extra_env,
    ]
    return [
        *("docker", "run", "--rm", "--init", "--network", "host", "--tmpfs", "/tmp"),
        *("--user", user, "-w", "/workspace"),
        *(arg for m in mounts for arg in ("-v", m)),
        *(arg for e in env for arg in ("-e", e)),
        *(
            image,
            "/opt/flower/bin/flower",
            "-w",
            "/workspace",
            "-r",
            "/runs",
            "run",
            f"{module}:main",
            "--fresh",
        ),
    ]
