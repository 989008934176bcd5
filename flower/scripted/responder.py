"""ScriptedResponder: answers each request with the first matching, not exhausted scenario rule."""

from __future__ import annotations

import json
import re
import threading
from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

from .plan import UNMATCHED, ResponsePlan
from .render import build_message, message_events, new_tool_use_id
from .request import ParsedRequest
from .scenario import Action, Block, Rule, Scenario

UNMATCHED_TEXT = "[scripted model] no rule matched"
CUT_TEXT = "[scripted model] this stream is cut"

_PLACEHOLDER = re.compile(r"\{\{(cwd|session|n|prefix|model)\}\}|\{(cwd|session|n|prefix|model)\}")


class PlaceholderValues(Mapping[str, "str | None"]):
    """{cwd} {session} {n} {prefix} {model} of a request, each computed when a reply uses it:
    {cwd} reads every message's text, which a long history makes costly (time and memory)."""

    NAMES = ("cwd", "session", "n", "prefix", "model")

    def __init__(self, request: ParsedRequest) -> None:
        self.request = request

    def __getitem__(self, name: str) -> str | None:
        if name == "cwd":
            return self.request.cwd
        if name == "n":
            return str(self.request.nth)
        if name in ("session", "prefix", "model"):
            return str(getattr(self.request, name))
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.NAMES)

    def __len__(self) -> int:
        return len(self.NAMES)


def substitute(value: Any, context: Mapping[str, str | None]) -> Any:
    """Replace {cwd} {session} {n} {prefix} {model} in strings (recursively); {{x}} gives a literal {x}.

    A placeholder whose value is unknown (e.g. no cwd in the request) stays as written, so the
    failure is visible instead of silently turning into an empty path.
    """
    if isinstance(value, str):

        def one(found: re.Match[str]) -> str:
            if found.group(1):
                return "{" + found.group(1) + "}"
            known = context.get(found.group(2))
            return found.group(0) if known is None else str(known)

        return _PLACEHOLDER.sub(one, value)
    if isinstance(value, list):
        return [substitute(v, context) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, context) for k, v in value.items()}
    return value


def estimate_tokens(body: dict[str, Any]) -> int:
    """A plausible count_tokens answer: about 4 characters per token of the prompt parts."""
    parts = [body.get("system"), body.get("messages"), body.get("tools")]
    return max(1, len(json.dumps(parts, ensure_ascii=False)) // 4)


class ScriptedResponder:
    """A Responder (see plan.py) that plays a Scenario. Thread-safe; holds the rule counters."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self._lock = threading.Lock()
        self._fired: dict[tuple[int, str], int] = defaultdict(int)  # (rule, session or "") -> fires
        self._cursor: dict[tuple[int, str], int] = defaultdict(int)  # (rule, session) -> next step

    def respond(self, request: ParsedRequest) -> ResponsePlan:
        if request.endpoint == "count_tokens":
            return ResponsePlan.json({"input_tokens": estimate_tokens(request.body)}, rule="count_tokens")
        if request.endpoint != "messages":
            return ResponsePlan.error(404, f"[scripted model] no endpoint at {request.path}", rule=UNMATCHED)
        with self._lock:
            chosen = self._choose(request)
        if chosen is None:
            return self._plan(Action(reply=(Block("text", text=UNMATCHED_TEXT),)), request, UNMATCHED, None)
        rule, step = chosen
        return self._plan(rule.actions[step], request, rule.label, step if rule.is_sequence else None)

    def _choose(self, request: ParsedRequest) -> tuple[Rule, int] | None:
        session = request.session
        for rule in self.scenario.rules:
            count_key = (rule.index, session if rule.per_session else "")
            if rule.times is not None and self._fired[count_key] >= rule.times:
                continue
            if not rule.matcher.matches(request):
                continue
            self._fired[count_key] += 1
            cursor_key = (rule.index, session)
            step = min(self._cursor[cursor_key], len(rule.actions) - 1)
            self._cursor[cursor_key] = step + 1
            return rule, step
        return None

    def _plan(self, action: Action, request: ParsedRequest, label: str, step: int | None) -> ResponsePlan:
        defaults = self.scenario.defaults
        timing: dict[str, Any] = {
            "delay_s": defaults.delay_s if action.delay_s is None else action.delay_s,
            "chunk_delay_s": defaults.chunk_delay_s if action.chunk_delay_s is None else action.chunk_delay_s,
            "rule": label,
            "step": step,
        }
        if action.outage_s is not None:
            return ResponsePlan.outage(action.outage_s, **timing)
        if action.error is not None:
            return ResponsePlan.error(action.error, action.error_message, **timing)
        context = PlaceholderValues(request)
        blocks = action.reply or (Block("text", text=CUT_TEXT),)
        message = build_message(
            [self._content(b, context) for b in blocks],
            model=substitute(action.reply_model or defaults.reply_model, context),
            usage={**defaults.usage, **action.usage},
            stop_reason=action.stop_reason,
        )
        if not request.stream:
            if action.cut_after is not None:  # a non-streamed answer has nothing to cut: drop it
                return ResponsePlan.drop(**timing)
            return ResponsePlan.json(message, **timing)
        return ResponsePlan.sse(message_events(message), cut_after=action.cut_after, **timing)

    @staticmethod
    def _content(block: Block, context: Mapping[str, str | None]) -> dict[str, Any]:
        if block.kind == "tool_use":
            return {
                "type": "tool_use",
                "id": block.id or new_tool_use_id(),
                "name": block.name,
                "input": substitute(block.input, context),
            }
        return {"type": "text", "text": substitute(block.text, context)}
