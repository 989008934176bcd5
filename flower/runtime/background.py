"""Background subagents the main thread will be woken by, so a result message mid-run is not the end."""

from __future__ import annotations

from typing import Any

from claude_agent_sdk import (
    TERMINAL_TASK_STATUSES,
    TaskNotificationMessage,
    TaskStartedMessage,
    TaskUpdatedMessage,
    ToolResultBlock,
    UserMessage,
)


class Background:
    """Background subagents still running. A launch is known from the Agent tool's result
    ("Async agent launched…") or from TaskStarted, whichever the CLI sends first; it ends on a
    terminal TaskNotification or TaskUpdated (the CLI sometimes sends only one)."""

    LAUNCHED = "Async agent launched"

    def __init__(self) -> None:
        self.launched: set[str] = set()  # tool_use ids of Agent calls still running
        self.tasks: dict[str, str | None] = {}  # task id -> its tool_use id
        self.finished: set[str] = set()  # tool_use ids already reported done

    def note(self, msg: Any) -> None:
        if isinstance(msg, UserMessage) and isinstance(msg.content, list):
            for block in msg.content:
                if isinstance(block, ToolResultBlock) and self.LAUNCHED in block_text(block.content):
                    if block.tool_use_id not in self.finished:
                        self.launched.add(block.tool_use_id)
        elif isinstance(msg, TaskStartedMessage):
            self.tasks[msg.task_id] = msg.tool_use_id
            if msg.tool_use_id and msg.tool_use_id not in self.finished:
                self.launched.add(msg.tool_use_id)
        elif isinstance(msg, TaskNotificationMessage):
            self._finish(msg.task_id)
        elif (
            isinstance(msg, TaskUpdatedMessage) and (msg.patch or {}).get("status") in TERMINAL_TASK_STATUSES
        ):
            self._finish(msg.task_id)

    def _finish(self, task_id: str) -> None:
        tool_use_id = self.tasks.pop(task_id, None)
        if tool_use_id:
            self.launched.discard(tool_use_id)
            self.finished.add(tool_use_id)

    @property
    def pending(self) -> bool:
        return bool(self.launched or self.tasks)


def block_text(content: Any) -> str:
    """The text of a tool result's content (a string, or a list of text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""
