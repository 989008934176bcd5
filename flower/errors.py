"""Every error flower raises on purpose, in one tree.

::

    FlowerError                 something the person or the calling code can fix; `flower`
    │                           prints it as one line and exits 2 (the `kind` goes to .exit.json)
    ├── ConfigError             a value given to flower's API is out of range (AgentSpec,
    │                           Handoff, with_goal, coordinator, ...)          also a ValueError
    ├── WorkspaceError          the workspace is not a directory, or --isolate finds no usable
    │                           git repository                                 also a ValueError
    ├── WorkflowError           a workflow or step that cannot run, or user code in a step
    │                           (prompt, gate, reduce) raised; the message names the step
    │                                                                          also a ValueError
    └── TargetError             `flower run TARGET` names nothing that loads to a Workflow
                                                                               also a ValueError

    StepAbort                   not an error: a gate's way to give up on a step at once

`flower.scripted` (the scripted model: a library of its own, importing nothing else of flower,
so the gateway and a test can load it alone) keeps its two outside this tree: ScenarioError (a
scenario file, naming file, rule and field) and LogFormatError (a request log of another or a
newer format, raised by `read_request_log`). Both are ValueErrors with one-line messages;
`flower-scripted` and flower-batch's pre-flight print a ScenarioError as one line.

Each leaf is also a ValueError because that is what flower raised before the tree existed, so
`except ValueError` in calling code keeps working. Anything else that escapes flower (TypeError
for a wrong type passed by code, OSError, sqlite3 errors the command line does not name) is a bug
or an unforeseen failure and surfaces with its traceback.
"""

from __future__ import annotations


class FlowerError(Exception):
    """Base of every error a person or calling code can cause and fix; the message says how."""

    kind = "usage"  # the exit class written to runs/.exit.json (flower.exitinfo.CLASSES)


class ConfigError(FlowerError, ValueError):
    """A value given to flower's API is out of range; the message names the field and the fix."""


class WorkspaceError(FlowerError, ValueError):
    """The workspace cannot be used: not a directory, or not the git repository --isolate needs."""


class WorkflowError(FlowerError, ValueError):
    """A workflow definition or step input that cannot run; the message names the step."""

    kind = "workflow"


class TargetError(FlowerError, ValueError):
    """A workflow target that cannot be loaded; the message says what to fix."""

    kind = "target"


class StepAbort(Exception):
    """Raised in a gate to give up on a step at once: remaining retries are not used."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
