"""AgentSpec: a role — its instructions, tools, model and budget (upstream's fields)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flower.errors import ConfigError


@dataclass
class AgentSpec:
    name: str
    instructions: str = ""
    allowed_tools: list[str] = field(default_factory=lambda: ["Read", "Glob", "Grep"])
    disallowed_tools: list[str] = field(default_factory=list)
    model: str | None = None
    effort: str | None = None
    max_turns: int | None = None
    max_budget_usd: float | None = None
    permission_mode: str = "default"
    agents: dict[str, Any] | None = None
    mcp_servers: dict[str, Any] = field(default_factory=dict)
    hooks: dict[str, Any] | None = None
    compact: bool | None = None
    env: dict[str, str] = field(default_factory=dict)
    glance: bool = False
    workbench: bool = True
    delegate_only: bool = False

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ConfigError("AgentSpec.name must be a non-empty string")
        if self.max_turns is not None and self.max_turns < 1:
            raise ConfigError(f"AgentSpec {self.name!r}: max_turns must be >= 1 (got {self.max_turns})")


TOOL_ALIASES = {"Task": "Agent"}  # the CLI's older name for the Agent tool


def tool_base(name: str) -> str:
    """The tool an `allowed_tools` entry names: ``Bash(git:*)`` -> ``Bash``; ``Task`` -> ``Agent``."""
    base = name.split("(", 1)[0].strip()
    return TOOL_ALIASES.get(base, base)
