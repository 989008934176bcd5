"""The contract between the HTTP core and a Responder.

A Responder turns one ParsedRequest into one ResponsePlan; the core carries the plan out.
Nothing else is shared, so a scripted, proxying or replaying responder plugs in the same way:

    class Responder(Protocol):
        def respond(self, request: ParsedRequest) -> ResponsePlan: ...

`respond` is called from the connection's thread (several at once): keep shared state locked.
A responder may also have `begin(request, body)`, called before the body is parsed (headers
and path are there, `body` of the request is still empty): a proxy forwards the raw bytes at
once. `body` is the raw body's pieces as they are read off the socket (a body of known length:
`raw_body` is empty until the core has read it all, after begin), or None with `raw_body`
complete. A begin that forwarded the bytes may set `request.unparsed`: the core then parses the
body only after the answer (the log needs it), and respond() calls `request.parse()` itself if
it must know sooner. What begin leaves in `request.begun` is closed by the core after respond
(or instead of it, when the body is bad), unless respond took it out.
The core handles `HEAD/GET {prefix}/api/hello` and unknown paths itself; a responder sees
`endpoint` "messages" and "count_tokens".

What a plan can say, in the order the core applies it:
  1. `delay_s`: sleep before anything is sent.
  2. `outage_s`: stop listening (new connections are refused) for that many seconds, drop this
     and every other open connection, then listen again on the same port.
  3. `cut_after == 0` with no events: drop the connection without any response.
  4. `events` (SSE): status + headers, then the events, `chunk_delay_s` apart; with `cut_after=N`
     only the first N events are sent and the connection is reset (the chunked body never ends).
     `events` may be any iterable, e.g. a generator pulling from an upstream stream.
  5. `after`: callables the core runs once the answer went out (by the request log's writer
     thread, after at most a short wait: a slow answer must not hold it), for bookkeeping that
     is not the client's wait. stop() returns once they all ran.
  5. otherwise `json_body` with `status` (an error body for 4xx/5xx; None means an empty body).
`rule`/`step` name what answered, for the request log ("unmatched" when nothing did).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .request import ParsedRequest

SSEEvent = tuple[str, dict[str, Any]]

# HTTP status -> Anthropic error type (https://docs.anthropic.com/en/api/errors).
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

ERROR_MESSAGES: dict[int, str] = {
    400: "[scripted model] invalid request",
    401: "[scripted model] invalid x-api-key",
    403: "[scripted model] permission denied",
    404: "[scripted model] not found",
    413: "[scripted model] request too large",
    429: "[scripted model] rate limited",
    500: "[scripted model] internal server error",
    529: "[scripted model] overloaded",
}

UNMATCHED = "unmatched"


def new_request_id() -> str:
    return "req_scripted_" + uuid.uuid4().hex[:20]


def error_body(status: int, message: str | None = None) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message or ERROR_MESSAGES.get(status, kind)}}


@dataclass
class ResponsePlan:
    """What to answer to one request. Build it with the class methods below."""

    status: int = 200
    json_body: Any = None
    events: Iterable[SSEEvent] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    cut_after: int | None = None
    outage_s: float | None = None
    rule: str = ""
    step: int | None = None  # position in a rule's sequence, when it has one
    after: list[Callable[[], None]] = field(default_factory=list)  # see 5. above

    @classmethod
    def json(cls, body: Any, status: int = 200, **kw: Any) -> ResponsePlan:
        return cls(status=status, json_body=body, **kw)

    @classmethod
    def sse(cls, events: Iterable[SSEEvent], **kw: Any) -> ResponsePlan:
        return cls(events=events, **kw)

    @classmethod
    def error(cls, status: int, message: str | None = None, **kw: Any) -> ResponsePlan:
        return cls(status=status, json_body=error_body(status, message), **kw)

    @classmethod
    def drop(cls, **kw: Any) -> ResponsePlan:
        """Close the connection without answering."""
        return cls(status=0, cut_after=0, **kw)

    @classmethod
    def outage(cls, seconds: float, **kw: Any) -> ResponsePlan:
        return cls(status=0, outage_s=seconds, **kw)

    @property
    def outcome(self) -> str:
        """How the exchange ends: outage, dropped, cut, stream or response."""
        if self.outage_s is not None:
            return "outage"
        if self.cut_after is not None:
            return "cut" if self.events is not None and self.cut_after > 0 else "dropped"
        return "stream" if self.events is not None else "response"


class Responder(Protocol):
    def respond(self, request: ParsedRequest) -> ResponsePlan: ...
