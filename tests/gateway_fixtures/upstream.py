"""The tests' "real API": a scripted model that also notes, per request, the credential it
was sent and the usage it answered with (what the real API would bill)."""

from __future__ import annotations

import threading
from pathlib import Path

from flower.scripted import ParsedRequest, ResponsePlan, Scenario, ScriptedResponder

PROJECT = Path(__file__).resolve().parent / "project"
SCENARIO = PROJECT / "scenarios" / "upstream.toml"


class Counting:
    def __init__(self, scenario: Path | dict = SCENARIO) -> None:
        source = Scenario.load(scenario) if isinstance(scenario, Path) else Scenario.from_dict(scenario)
        self.inner = ScriptedResponder(source)
        self.credentials: list[str] = []
        self.usages: list[dict[str, int]] = []
        self.models: list[str] = []
        self._lock = threading.Lock()

    def respond(self, request: ParsedRequest) -> ResponsePlan:
        plan = self.inner.respond(request)
        with self._lock:
            self.credentials.append(request.credential_sha256)
            if request.endpoint == "messages" and plan.events is not None:
                events = list(plan.events)
                plan.events = events
                start = next(e[1]["message"]["usage"] for e in events if e[0] == "message_start")
                delta = next(e[1]["usage"] for e in events if e[0] == "message_delta")
                self.usages.append({**start, **delta})
                self.models.append(request.model)
        return plan

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.usages)
