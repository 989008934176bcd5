"""One Claude Code transcript (a session, or a subagent's) as ATIF steps.

The CLI writes one entry per content block of a response, each with the response's id and usage:
consecutive assistant entries of one id are one ATIF agent step (one model call: its text, its
thinking as `reasoning_content`, its tool calls, its tokens and cost as `metrics`). A tool's result
comes back in a later user entry; it becomes an observation result of the step that made the
call (ATIF wants each observation to name a tool call of its own step). A user entry with text is
a user step. Steps are plain dicts, numbered by the trajectory that collects them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flower_batch.transcripts.steps import result_text

from .costs import Pricer

TEXT_LIMIT = 200_000  # characters kept of any one message, thought, tool result or tool input
SYNTHETIC = "<synthetic>"  # the CLI's own stand-in answers (an API error, an interrupt)

# A subagent launched by a tool call: (tool_use id) -> a ref dict for the observation, or None.
SubagentRef = Callable[[str], dict[str, Any] | None]


def clip(text: str, limit: int = TEXT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters not exported)"


def timestamp(value: Any) -> str | None:
    """An ISO 8601 time as ATIF wants it, or None: the job wrote these, a bad one is dropped."""
    if not isinstance(value, str) or not value or len(value) > 64:
        return None
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value


def arguments(value: Any) -> dict[str, Any]:
    """A tool call's input as ATIF arguments (an object), clipped when it is huge."""
    if not isinstance(value, dict):
        return {"input": value} if value is not None else {}
    text = json.dumps(value, ensure_ascii=False)
    if len(text) <= TEXT_LIMIT:
        return value
    return {"clipped_input": clip(text)}


def metrics(usage: Mapping[str, Any], cost: float | None) -> dict[str, Any]:
    """ATIF metrics of one call: prompt tokens include the cached and cache-written ones."""

    def n(key: str) -> int:
        value = usage.get(key)
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0

    read, write = n("cache_read_input_tokens"), n("cache_creation_input_tokens")
    return {
        "prompt_tokens": n("input_tokens") + read + write,
        "completion_tokens": n("output_tokens"),
        "cached_tokens": read,
        "cost_usd": cost,
        "extra": {"input_tokens": n("input_tokens"), "cache_creation_input_tokens": write},
    }


@dataclass
class SessionSteps:
    """The steps of one transcript, and its calls' totals (for final metrics)."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0  # calls with no price: the cost total is then a lower bound
    models: list[str] = field(default_factory=list)


class _Converter:
    def __init__(self, pricer: Pricer, subagent: SubagentRef, flower: Mapping[str, Any]) -> None:
        self.pricer, self.subagent, self.flower = pricer, subagent, dict(flower)
        self.out = SessionSteps()
        self.calls: dict[str, dict[str, Any]] = {}  # tool_use id -> the step that made the call
        self.current: dict[str, Any] | None = None  # the agent step of the response being read
        self.current_id: str | None = None

    def step(self, source: str, message: str, at: Any, **more: Any) -> dict[str, Any]:
        step: dict[str, Any] = {"source": source, "message": clip(message)}
        if timestamp(at):
            step["timestamp"] = at
        step.update(more)
        step["extra"] = {"flower": self.flower}
        self.out.steps.append(step)
        return step

    def assistant(self, entry: Mapping[str, Any], message: Mapping[str, Any]) -> None:
        mid = str(message.get("id") or entry.get("uuid"))
        model = str(message.get("model") or "")
        if self.current is None or mid != self.current_id:
            if model == SYNTHETIC:  # no model answered: the CLI's own words
                self.current, self.current_id = None, None
                text = result_text(message.get("content"))
                step = self.step("system", text, entry.get("timestamp"))
                step["extra"] = {"flower": {**self.flower, "synthetic": True}}
                return
            self.current, self.current_id = self.step("agent", "", entry.get("timestamp")), mid
            self.current["llm_call_count"] = 1
            if model:
                self.current["model_name"] = model
                if model not in self.out.models:
                    self.out.models.append(model)
        usage = message.get("usage")
        if isinstance(usage, dict):
            self.current["metrics"] = metrics(usage, self.pricer.cost(model, usage))
        self.blocks(self.current, message.get("content"))

    def blocks(self, step: dict[str, Any], content: Any) -> None:
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks if isinstance(blocks, list) else []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and str(block.get("text") or "").strip():
                step["message"] = clip("\n\n".join(filter(None, [step["message"], str(block["text"])])))
            elif kind == "thinking" and block.get("thinking"):
                joined = "\n\n".join(filter(None, [step.get("reasoning_content"), str(block["thinking"])]))
                step["reasoning_content"] = clip(joined)
            elif kind == "tool_use":
                call_id = str(block.get("id") or f"call-{len(self.calls) + 1}")
                call = {
                    "tool_call_id": call_id,
                    "function_name": str(block.get("name") or "?"),
                    "arguments": arguments(block.get("input")),
                }
                step.setdefault("tool_calls", []).append(call)
                self.calls[call_id] = step
                ref = self.subagent(call_id)
                if ref is not None:  # the Agent call's result holds the ref, added now: it may never return
                    self.observe(step, {"source_call_id": call_id, "subagent_trajectory_ref": [ref]})

    def observe(self, step: dict[str, Any], result: dict[str, Any]) -> None:
        results = step.setdefault("observation", {"results": []})["results"]
        for known in results:
            if result.get("source_call_id") and known.get("source_call_id") == result["source_call_id"]:
                known.update({k: v for k, v in result.items() if k != "subagent_trajectory_ref"})
                return
        results.append(result)

    def user(self, entry: Mapping[str, Any], message: Mapping[str, Any]) -> None:
        self.current, self.current_id = None, None
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        texts = []
        for block in blocks if isinstance(blocks, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                self.tool_result(entry, block)
            elif block.get("type") == "text" and str(block.get("text") or "").strip():
                texts.append(str(block["text"]))
        if texts:
            self.step("user", "\n\n".join(texts), entry.get("timestamp"))

    def tool_result(self, entry: Mapping[str, Any], block: Mapping[str, Any]) -> None:
        call_id = str(block.get("tool_use_id") or "")
        result: dict[str, Any] = {"content": clip(result_text(block.get("content")))}
        if block.get("is_error"):
            result["extra"] = {"is_error": True}
        step = self.calls.get(call_id)
        if step is not None:
            self.observe(step, {"source_call_id": call_id, **result})
            return
        # A result whose call is not in this transcript's part (an earlier round made it).
        result["extra"] = {**result.get("extra", {}), "tool_use_id": call_id}
        self.step("system", "a tool result whose call is not in this step", entry.get("timestamp"))
        self.out.steps[-1]["observation"] = {"results": [result]}

    def total(self) -> SessionSteps:
        for step in self.out.steps:
            m = step.get("metrics")
            if not m:
                continue
            self.out.prompt_tokens += m["prompt_tokens"]
            self.out.completion_tokens += m["completion_tokens"]
            self.out.cached_tokens += m["cached_tokens"]
            if m["cost_usd"] is None:
                self.out.unpriced += 1
            else:
                self.out.cost_usd += m["cost_usd"]
        return self.out


def session_steps(
    entries: Sequence[Mapping[str, Any]],
    pricer: Pricer,
    subagent: SubagentRef,
    flower: Mapping[str, Any],
) -> SessionSteps:
    """ATIF steps (unnumbered) of a transcript's entries; `flower` goes in every step's extra."""
    conv = _Converter(pricer, subagent, flower)
    for entry in entries:
        message = entry.get("message")
        if not isinstance(message, dict) or entry.get("isMeta"):
            continue
        if entry.get("type") == "assistant":
            conv.assistant(entry, message)
        elif entry.get("type") == "user":
            conv.user(entry, message)
    return conv.total()
