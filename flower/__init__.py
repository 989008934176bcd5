"""flower: a long-horizon agent workflow runtime on the real claude-agent-sdk.

Names are imported on first use (PEP 562), so light modules such as `flower.fileio` or the
scripted model can be imported without loading the SDK — every command starts faster.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "HumanChannel": "starter.channel",
    "CLARIFY_RESUME": "catalogue.starter",
    "clarify_step": "starter.flow",
    "goal_step": "starter.flow",
    "starter_flow": "starter.flow",
    "with_goal": "starter.flow",
    "Handoff": "context.handoff",
    "Lineage": "flows.lineage",
    "StepResult": "result",
    "WORKER_RULES": "catalogue.starter",
    "clarify": "starter.roles",
    "coordinator": "starter.roles",
    "judge": "starter.roles",
    "oracle": "starter.roles",
    "worker": "starter.roles",
    "HANDOFF_DUE": "runtime.engine",
    "INTERRUPTED": "runtime.engine",
    "Runtime": "runtime.engine",
    "AgentSpec": "spec",
    "wake_state": "starter.wake",
    "Workbench": "context.workbench",
    "Step": "flows.workflow",
    "StepAbort": "errors",
    "Workflow": "flows.workflow",
    "WorkflowError": "errors",
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
    from flower.starter.channel import HumanChannel
    from flower.starter.flow import clarify_step, goal_step, starter_flow, with_goal
    from flower.starter.roles import clarify, coordinator, judge, oracle, worker
    from flower.starter.wake import wake_state

    from .catalogue.starter import CLARIFY_RESUME, WORKER_RULES
    from .context.handoff import Handoff
    from .context.workbench import Workbench
    from .errors import StepAbort, WorkflowError
    from .flows.lineage import Lineage
    from .flows.workflow import Step, Workflow
    from .result import StepResult
    from .runtime.engine import HANDOFF_DUE, INTERRUPTED, Runtime
    from .spec import AgentSpec
