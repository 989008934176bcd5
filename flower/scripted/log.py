"""The request log: every request the server saw, in memory and optionally as JSONL on disk."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from .plan import ResponsePlan
from .request import ParsedRequest


def make_record(req: ParsedRequest, plan: ResponsePlan) -> dict[str, Any]:
    """One log entry. Header values of secrets were already redacted when the request was parsed."""
    return {
        "time": req.received_at,
        "method": req.method,
        "path": req.path,
        "prefix": req.prefix,
        "endpoint": req.endpoint,
        "session": req.session,
        "nth": req.nth,
        "model": req.model,
        "stream": req.stream,
        "n_messages": len(req.messages),
        "rule": plan.rule,
        "step": plan.step,
        "status": plan.status,
        "outcome": plan.outcome,
        "headers": req.headers,
        "body": req.body,
    }


class RequestLog:
    """Thread-safe list of records; each one is also appended as a JSON line to `path` if set."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else None
        self._records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def add(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._records.append(record)
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._records)
