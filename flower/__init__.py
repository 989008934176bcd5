"""flower: a long-horizon agent workflow runtime on the real claude-agent-sdk."""

from .handoff import Handoff
from .lineage import Lineage
from .result import StepResult
from .runtime import HANDOFF_DUE, INTERRUPTED, Runtime
from .spec import AgentSpec
from .wake import wake_state
from .workflow import Step, StepAbort, Workflow, WorkflowError

__all__ = [
    "AgentSpec",
    "HANDOFF_DUE",
    "Handoff",
    "INTERRUPTED",
    "Lineage",
    "Runtime",
    "Step",
    "StepAbort",
    "StepResult",
    "Workflow",
    "WorkflowError",
    "wake_state",
]
__version__ = "0.1.0"
