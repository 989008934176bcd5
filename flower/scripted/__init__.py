"""The scripted Messages-API server: the project's offline model (and the core of the batch gateway).

    from flower.scripted import Scenario, ScriptedServer
    with ScriptedServer(Scenario.load("x.toml"), keep_requests=True) as srv:
        options = ClaudeAgentOptions(env=srv.env(tmp / "cfg"), ...)
        ...
        assert not srv.unmatched

`keep_requests=True` keeps every request in memory (`srv.requests`), for tests; otherwise the
server holds none and `log_path` is the record (read it back with `read_request_log`).
Scenario format: docs/scenario-format.md. Responder contract: flower/scripted/plan.py.
"""

from .errors import ScenarioError
from .logformat import LOG_FORMAT, LogFormatError, read_request_log
from .plan import ERROR_TYPES, UNMATCHED, Responder, ResponsePlan, SSEEvent, error_body
from .render import build_message, message_events
from .request import ParsedRequest
from .responder import UNMATCHED_TEXT, ScriptedResponder
from .scenario import Scenario
from .server import API_KEY, MessagesServer, ScriptedServer

__all__ = [
    "API_KEY",
    "ERROR_TYPES",
    "LOG_FORMAT",
    "UNMATCHED",
    "UNMATCHED_TEXT",
    "LogFormatError",
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
    "read_request_log",
]
