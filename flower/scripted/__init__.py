"""The scripted Messages-API server: the project's offline model (and the core of the batch gateway).

    from flower.scripted import Scenario, ScriptedServer
    with ScriptedServer(Scenario.load("x.toml")) as srv:
        options = ClaudeAgentOptions(env=srv.env(tmp / "cfg"), ...)
        ...
        assert not srv.unmatched

Scenario format: docs/scenario-format.md. Responder contract: flower/scripted/plan.py.
"""

from .errors import ScenarioError
from .plan import ERROR_TYPES, UNMATCHED, Responder, ResponsePlan, SSEEvent, error_body
from .render import build_message, message_events
from .request import ParsedRequest
from .responder import UNMATCHED_TEXT, ScriptedResponder
from .scenario import Scenario
from .server import API_KEY, MessagesServer, ScriptedServer

__all__ = [
    "API_KEY",
    "ERROR_TYPES",
    "UNMATCHED",
    "UNMATCHED_TEXT",
    "MessagesServer",
    "ParsedRequest",
    "Responder",
    "ResponsePlan",
    "SSEEvent",
    "Scenario",
    "ScenarioError",
    "ScriptedResponder",
    "ScriptedServer",
    "build_message",
    "error_body",
    "message_events",
]
