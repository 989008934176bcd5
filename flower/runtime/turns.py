"""Which result message answers the prompt the runtime sent, and not a turn the CLI began itself.

In one CLI process the session also runs turns nobody sent: a background subagent's
notification, or, when a session is resumed after its process was killed, the notice that a
background agent "didn't finish before the previous session ended". Such a turn ends in a
result message of its own (CLI 2.1.327: ``success``, 0 turns, $0, ``origin`` of kind
``task-notification``), and it can arrive while the runtime's prompt is still waiting for the
model. Taken for the step's result, it ended the step with no answer and left the prompt's
request to a CLI being closed.

So every prompt goes out as a message carrying a fresh uuid, and a result counts as the answer
only when it lists that uuid. A result that lists none is attributed by its origin: a turn the
CLI began itself says so; anything else (an older CLI, an interrupted turn) is taken as ours.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from claude_agent_sdk import ClaudeSDKClient, ResultMessage


async def send(client: ClaudeSDKClient, text: str) -> str:
    """Send `text` as a user message with a new uuid; returns the uuid."""
    stamp = str(uuid.uuid4())
    message: dict[str, Any] = {
        "type": "user",
        "message": {"role": "user", "content": text},
        "parent_tool_use_id": None,
        "uuid": stamp,
    }

    async def one() -> AsyncIterator[dict[str, Any]]:
        yield message

    await client.query(one())
    return stamp


def answers(msg: ResultMessage, sent: str) -> bool:
    """True when `msg` is the result of the turn that took in the prompt sent with `sent`."""
    taken = [*(msg.user_message_uuids or []), *([msg.user_message_uuid] if msg.user_message_uuid else [])]
    if taken and sent:
        return sent in taken
    return msg.origin is None or msg.origin.get("kind", "human") == "human"
