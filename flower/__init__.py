"""flower: a long-horizon agent workflow runtime on the real claude-agent-sdk."""

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

__all__ = [
    "CLARIFY_RESUME",
    "AgentSpec",
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
