"""The PostToolUse hooks the runtime adds to a role's own: the spill of large tool results to
the workbench (flower.context.trim) and the limits' notices (flower.runtime.wrap_up)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from claude_agent_sdk import HookCallback, HookContext, HookInput, HookJSONOutput, HookMatcher

from flower.context.trim import spill
from flower.spec import AgentSpec


def session_hooks(
    spec: AgentSpec, spill_root: Path | None, spill_threshold: int, notices: HookCallback | None
) -> dict[str, Any] | None:
    """The spec's hooks, plus the spill hook (a workbench and a spec that uses it) and the
    notices' hook (`notices`, when there are notices to give)."""
    spills = spill_root is not None and spec.workbench and spill_threshold > 0
    if not spills and notices is None:
        return spec.hooks
    hooks = {event: list(matchers) for event, matchers in (spec.hooks or {}).items()}
    if spills:
        assert spill_root is not None
        hooks.setdefault("PostToolUse", []).append(
            HookMatcher(matcher=None, hooks=[spill_hook(spill_root, spill_threshold)])
        )
    if notices is not None:
        hooks.setdefault("PostToolUse", []).append(HookMatcher(matcher=None, hooks=[notices]))
    return hooks


def spill_hook(root: Path, threshold: int = 4000) -> HookCallback:
    """A PostToolUse hook: string parts of a tool result over `threshold` chars go to
    ``<root>/spill/<sha16>.txt`` and the model sees a pointer plus the first 400 chars.

    CLI 2.1.327 replaces a tool's output with the hook's ``updatedToolOutput`` only when the
    value keeps the tool's output schema (Bash: stdout/stderr/..., Read: file.content ...), so
    the hook swaps string leaves in place and keeps every key. Checked against the real CLI
    for Read and Bash: the tool_result the API receives carries the pointer.
    """

    def replace(value: Any) -> tuple[Any, bool]:
        if isinstance(value, str):
            pointer = spill(value, root, threshold=threshold)
            return (pointer, True) if pointer is not None else (value, False)
        if isinstance(value, dict):
            out, changed = {}, False
            for key, item in value.items():
                out[key], hit = replace(item)
                changed = changed or hit
            return out, changed
        if isinstance(value, list):
            items = [replace(item) for item in value]
            return [v for v, _ in items], any(hit for _, hit in items)
        return value, False

    async def hook(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        try:
            new, changed = replace(input_data.get("tool_response"))
        except OSError:
            return {}  # no room on disk: the model gets the full result, nothing is lost
        if not changed:
            return {}
        return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": new}}

    return hook
