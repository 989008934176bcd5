"""StepResult: what one `Runtime.run` produced, and its manifest row form."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from flower.clock import now_iso


@dataclass
class StepResult:
    step: str
    session_id: str = ""
    ok: bool = False
    cost_usd: float = 0.0
    num_turns: int = 0
    text: str = ""
    error: str | None = None
    started_at: str = field(default_factory=partial(now_iso, "milliseconds"))  # durations come from these
    ended_at: str = ""
    attempts: int = 1
    errors: list[str] = field(default_factory=list)
    resumed: bool = False
    retired: list[str] = field(default_factory=list)
    context: int = 0
    # Tool calls of the main thread, in order: [{"name", "input"}]. Lets reports and `repro`
    # compare what two runs actually did, not only what they said.
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # The model that answered (from the responses). "scripted-model" marks the offline scripted
    # server, so every output can say when no real model was involved.
    model: str = ""
    # The HTTP status of the API error that ended the step (None: no API error), so whoever
    # reads the manifest can tell a refused key (401) or spent credit (402) from a bad answer.
    api_error_status: int | None = None

    @property
    def duration_s(self) -> float:
        if not self.ended_at:
            return 0.0
        start = datetime.fromisoformat(self.started_at)
        end = datetime.fromisoformat(self.ended_at)
        return round((end - start).total_seconds(), 3)

    def to_row(self, run_id: str) -> dict[str, Any]:
        row = asdict(self)
        row["duration_s"] = self.duration_s
        row["run"] = run_id
        return row
