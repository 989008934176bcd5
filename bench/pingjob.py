"""The one-step job every benchmark runs: a workflow that asks "ping" and a scripted model that
answers "pong" — the smallest real job (one CLI start, one model turn, one manifest row)."""

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
