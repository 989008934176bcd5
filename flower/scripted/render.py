"""Anthropic message objects and the SSE event sequence that streams one (spec §8.3)."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

from .plan import SSEEvent


def new_message_id() -> str:
    # Must be unique per response: the CLI merges blocks by message id, and a reused id
    # makes it treat a new answer as part of an old one.
    return "msg_scripted_" + uuid.uuid4().hex[:24]


def new_tool_use_id() -> str:
    return "toolu_scripted_" + uuid.uuid4().hex[:24]


def build_message(
    content: list[dict[str, Any]], *, model: str, usage: dict[str, int], stop_reason: str | None = None
) -> dict[str, Any]:
    """A complete `type:"message"` object; stop_reason defaults to tool_use/end_turn by content."""
    if stop_reason is None:
        stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
    return {
        "id": new_message_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": dict(usage),
    }


def message_events(message: dict[str, Any]) -> list[SSEEvent]:
    """SSE events for a message: start, 3 per block (start, one delta, stop), message_delta, stop."""
    usage = message.get("usage", {})
    head = copy.deepcopy(message)
    head.update(content=[], stop_reason=None, stop_sequence=None)
    head["usage"] = {**usage, "output_tokens": 1}
    events: list[SSEEvent] = [("message_start", {"type": "message_start", "message": head})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {
                "type": "input_json_delta",
                "partial_json": json.dumps(block["input"], ensure_ascii=False),
            }
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage.get("output_tokens", 0)},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def encode_event(event: SSEEvent) -> bytes:
    name, data = event
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
