"""A Messages-API request as a responder sees it: where it was sent, who sent it, and text views of it.

Secrets never get here: the api-key and authorization header values are replaced by "[redacted]"
when the request is parsed, so nothing downstream (responders, logs) can write them anywhere.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

SENSITIVE_HEADERS = frozenset({"x-api-key", "authorization", "proxy-authorization", "cookie"})
REDACTED = "[redacted]"

# The CLI wraps injected context ("<system-reminder>…") into user turns; it is not what the user said.
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>\s*", re.S)
# The CLI announces its working directory in a role:"system" message ("# Environment" section).
_CWD = re.compile(r"Primary working directory: *([^\n]+)")

ENDPOINTS = {"/v1/messages": "messages", "/v1/messages/count_tokens": "count_tokens"}
# The CLI's body starts with its model: `{"model":"claude-…",…`. Only a first key can be read
# this cheaply and surely (a later "model" could be nested in anything before it).
_LEADING_MODEL = re.compile(rb'\A[ \t\n\r]*\{[ \t\n\r]*"model"[ \t\n\r]*:[ \t\n\r]*"([^"\\]{0,200})"')


def split_path(path: str) -> tuple[str, str | None, str]:
    """Split a request path into (prefix, endpoint, query).

    Anything before `/v1/` (or `/api/hello`) is the prefix, e.g. "/j/job1". The endpoint is
    "messages", "count_tokens", "hello" or None for anything else.
    """
    bare, _, query = path.partition("?")
    bare = bare.rstrip("/") or "/"
    if bare.endswith("/api/hello"):
        return bare[: -len("/api/hello")], "hello", query
    at = bare.find("/v1/")
    if at < 0:
        return "", None, query
    return bare[:at], ENDPOINTS.get(bare[at:]), query


def leading_model(raw: bytes) -> str | None:
    """The model of a raw JSON body whose first key is "model" (a plain string), else None."""
    found = _LEADING_MODEL.match(raw[:512])
    return found.group(1).decode("utf-8", "replace") if found else None


def credential_digest(headers: dict[str, str]) -> str:
    """sha256 of the caller's key (x-api-key or Bearer token): lets a gateway check per-job
    tokens without the key itself ever being held or logged."""
    lower = {k.lower(): v for k, v in headers.items()}
    key = lower.get("x-api-key") or lower.get("authorization", "").removeprefix("Bearer ").strip()
    return hashlib.sha256(key.encode()).hexdigest() if key else ""


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    return {k.lower(): (REDACTED if k.lower() in SENSITIVE_HEADERS else v) for k, v in headers.items()}


def block_text(block: Any) -> str:
    """Text carried by one content block: text blocks, tool_result content (string or blocks)."""
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_result":
        return content_text(block.get("content"))
    return ""


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (block_text(b) for b in content) if t)
    return ""


def _blocks(content: Any) -> list[Any]:
    return content if isinstance(content, list) else [content] if isinstance(content, str) else []


@dataclass
class ParsedRequest:
    """One HTTP request to the server, parsed. Responders get this and return a ResponsePlan."""

    method: str
    path: str  # as received, query string included
    prefix: str  # path part before /v1/ (or /api/hello): "" or e.g. "/j/job1"
    endpoint: str | None  # "messages" | "count_tokens" | "hello" | None (unknown path)
    headers: dict[str, str]  # lower-case names, secrets redacted
    body: dict[str, Any] = field(default_factory=dict)
    raw_body: bytes = b""
    received_at: float = 0.0
    nth: int = 0  # 1-based index of this /v1/messages request within its session (0 for others)
    credential_sha256: str = field(default="", repr=False)  # see credential_digest()
    # What a responder's begin() started (e.g. an upstream request); see plan.py.
    begun: dict[str, Any] = field(default_factory=dict, repr=False)
    # True while `body` is not parsed yet: a begin() that forwarded the raw bytes asked for the
    # parse to wait until after the answer (plan.py). parse() does it; `model` and `session`
    # read what they need from the raw bytes or parse first.
    unparsed: bool = field(default=False, repr=False)
    body_problem: str | None = field(default=None, repr=False)  # why `body` could not be parsed

    def parse(self) -> str | None:
        """Parse `raw_body` into `body` (once); the problem, if it is not a JSON object."""
        if self.unparsed:
            self.unparsed = False
            self.body_problem = parse_body(self)
        return self.body_problem

    @cached_property
    def session(self) -> str:
        """x-claude-code-session-id header, else metadata.user_id's session_id, else ""."""
        sid = self.headers.get("x-claude-code-session-id", "")
        if sid:
            return sid
        self.parse()
        user_id = (self.body.get("metadata") or {}).get("user_id") if isinstance(self.body, dict) else None
        try:
            return str(json.loads(user_id).get("session_id", "")) if isinstance(user_id, str) else ""
        except (ValueError, AttributeError):
            return ""

    @property
    def model(self) -> str:
        if self.unparsed:
            found = leading_model(self.raw_body)
            if found is not None:
                return found
            self.parse()
        return str(self.body.get("model", ""))

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream", False))

    @property
    def messages(self) -> list[dict[str, Any]]:
        msgs = self.body.get("messages")
        return [m for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else []

    @cached_property
    def system_text(self) -> str:
        """Text of the `system` field (string or blocks); the role's instructions end up here."""
        return content_text(self.body.get("system"))

    @cached_property
    def last_user_message(self) -> dict[str, Any] | None:
        # role:"system" messages may follow the user turn; skip them.
        return next((m for m in reversed(self.messages) if m.get("role") == "user"), None)

    @cached_property
    def last_user_text(self) -> str:
        """Text blocks and tool_result contents of the last user message, minus <system-reminder>s."""
        msg = self.last_user_message
        return _REMINDER.sub("", content_text(msg.get("content"))) if msg else ""

    @cached_property
    def last_is_tool_result(self) -> bool:
        msg = self.last_user_message
        return msg is not None and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in _blocks(msg.get("content"))
        )

    @cached_property
    def tool_result_text(self) -> str:
        """Contents of the tool_result blocks of the last user message."""
        msg = self.last_user_message
        if not msg:
            return ""
        return "\n".join(
            block_text(b)
            for b in _blocks(msg.get("content"))
            if isinstance(b, dict) and b.get("type") == "tool_result"
        )

    @cached_property
    def all_text(self) -> str:
        """Every text in `messages` (all roles, tool inputs as JSON); not the `system` field."""
        out: list[str] = []
        for msg in self.messages:
            for b in _blocks(msg.get("content")):
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    out.append(json.dumps(b.get("input", {}), ensure_ascii=False))
                else:
                    out.append(block_text(b))
        return "\n".join(t for t in out if t)

    @cached_property
    def cwd(self) -> str | None:
        """Working directory the CLI announced ("Primary working directory: …"), if any."""
        for text in (self.all_text, self.system_text):
            found = _CWD.search(text)
            if found:
                return found.group(1).strip()
        return None


def parse_body(req: ParsedRequest) -> str | None:
    """Set `req.body` from its raw bytes; the problem (one line) when they are not a JSON object."""
    if not req.raw_body:
        return None if req.endpoint in ("hello", None) else "empty request body; send a JSON object"
    try:
        body = json.loads(req.raw_body)
    except ValueError as err:
        return f"request body is not JSON ({err})"
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    req.body = body
    return None
