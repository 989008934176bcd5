"""A job's ATIF trajectory (flower_batch/export/atif.py) as Inspect chat messages and model usage.

The main thread only: system steps (the flower step boundaries, handoffs) become system messages,
user steps user messages, each model call an assistant message with its tool calls, and each
tool result a tool message after it. A subagent's conversation has no place in Inspect's flat
message list: its tool message names the subagent's trajectory, and its tokens and cost count in
the sample's model usage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def messages(trajectory: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for step in trajectory.get("steps") or []:
        text = str(step.get("message") or "")
        results = (step.get("observation") or {}).get("results") or []
        if step.get("source") == "agent":
            out.append(_assistant(step, text))
            calls = {c["tool_call_id"]: c["function_name"] for c in step.get("tool_calls") or []}
            out += [_tool(r, calls) for r in results if r.get("source_call_id") in calls]
            continue
        extra = [str(r.get("content") or "") for r in results if not r.get("source_call_id")]
        content = "\n\n".join(filter(None, [text, *extra]))
        if step.get("source") == "user":
            out.append({"role": "user", "content": content})
        else:  # Inspect's viewer shows system messages together, one after another: a line each
            out.append({"role": "system", "content": content + "\n"})
    return out


def _assistant(step: Mapping[str, Any], text: str) -> dict[str, Any]:
    content: str | list[dict[str, Any]] = text
    if step.get("reasoning_content"):
        content = [
            {"type": "reasoning", "reasoning": step["reasoning_content"]},
            {"type": "text", "text": text},
        ]
    message: dict[str, Any] = {"role": "assistant", "content": content, "source": "generate"}
    calls = [
        {
            "id": c["tool_call_id"],
            "function": c["function_name"],
            "arguments": c["arguments"],
            "type": "function",
        }
        for c in step.get("tool_calls") or []
    ]
    if calls:
        message["tool_calls"] = calls
    if step.get("model_name"):
        message["model"] = step["model_name"]
    return message


def _tool(result: Mapping[str, Any], calls: Mapping[str, str]) -> dict[str, Any]:
    content = str(result.get("content") or "")
    refs = [r.get("trajectory_id") for r in result.get("subagent_trajectory_ref") or []]
    if refs:
        content += "".join(f"\n[subagent trajectory {r}: in the job's trajectory.json]" for r in refs)
    message: dict[str, Any] = {
        "role": "tool",
        "content": content,
        "tool_call_id": result["source_call_id"],
        "function": calls[result["source_call_id"]],
    }
    if (result.get("extra") or {}).get("is_error"):
        message["error"] = {"type": "unknown", "message": content[:2000]}
    return message


def model_usage(trajectory: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Inspect ModelUsage per model, over every call of the job, its subagents' included.

    Inspect's input_tokens exclude the cache reads and writes (its fields for those); a cost is
    given when every call of that model was priced."""
    usage: dict[str, dict[str, Any]] = {}
    unpriced: set[str] = set()
    for traj in [trajectory, *(trajectory.get("subagent_trajectories") or [])]:
        for step in traj.get("steps") or []:
            m = step.get("metrics")
            if not m:
                continue
            model = str(step.get("model_name") or "unknown")
            u = usage.setdefault(
                model,
                {
                    "input_tokens": 0,
                    "output_tokens": 0,
                    "total_tokens": 0,
                    "input_tokens_cache_write": 0,
                    "input_tokens_cache_read": 0,
                    "total_cost": 0.0,
                },
            )
            extra = m.get("extra") or {}
            u["input_tokens"] += int(extra.get("input_tokens") or 0)
            u["input_tokens_cache_write"] += int(extra.get("cache_creation_input_tokens") or 0)
            u["input_tokens_cache_read"] += int(m.get("cached_tokens") or 0)
            u["output_tokens"] += int(m.get("completion_tokens") or 0)
            u["total_tokens"] += int(m.get("prompt_tokens") or 0) + int(m.get("completion_tokens") or 0)
            if m.get("cost_usd") is None:
                unpriced.add(model)
            else:
                u["total_cost"] = round(u["total_cost"] + float(m["cost_usd"]), 8)
    for model in unpriced:
        usage[model]["total_cost"] = None
    return usage
