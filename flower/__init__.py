"""flower: a long-horizon agent workflow runtime on the real claude-agent-sdk.

Names are imported on first use (PEP 562), so light modules such as `flower.fileio` or the
scripted model can be imported without loading the SDK — every command starts faster.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "HumanChannel": "channel",
    "CLARIFY_RESUME": "flows", "clarify_step": "flows", "goal_step": "flows", "starter_flow": "flows",
    "with_goal": "flows",
    "Handoff": "handoff",
    "Lineage": "lineage",
    "StepResult": "result",
    "WORKER_RULES": "roles", "clarify": "roles", "coordinator": "roles", "judge": "roles", "oracle": "roles",
    "worker": "roles",
    "HANDOFF_DUE": "runtime", "INTERRUPTED": "runtime", "Runtime": "runtime",
    "AgentSpec": "spec",
    "wake_state": "wake",
    "Workbench": "workbench",
    "Step": "workflow", "StepAbort": "workflow", "Workflow": "workflow", "WorkflowError": "workflow",
}

__all__ = [
    "AgentSpec",
    "CLARIFY_RESUME",
    "HANDOFF_DUE",
    "Handoff",
    "HumanChannel",
    "INTERRUPTED",
    "Lineage",
    "Runtime",
    "Step",
    "StepAbort",
    "StepResult",
    "WORKER_RULES",
    "Workbench",
    "Workflow",
    "WorkflowError",
    "clarify",
    "clarify_step",
    "coordinator",
    "goal_step",
    "judge",
    "oracle",
    "starter_flow",
    "wake_state",
    "with_goal",
    "worker",
]
__version__ = "0.1.0"
assert set(__all__) == set(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'flower' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:  # for type checkers and editors: the same names, eagerly
    from .channel import HumanChannel
    from .flows import CLARIFY_RESUME, clarify_step, goal_step, starter_flow, with_goal
    from .handoff import Handoff
    from .lineage import Lineage
    from .result import StepResult
    from .roles import WORKER_RULES, clarify, coordinator, judge, oracle, worker
    from .runtime import HANDOFF_DUE, INTERRUPTED, Runtime
    from .spec import AgentSpec
    from .wake import wake_state
    from .workbench import Workbench
    from .workflow import Step, StepAbort, Workflow, WorkflowError
