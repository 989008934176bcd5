"""Replay mode: serve a recorded job's responses again, each to a request of its shape, and stop
at the first request that matches none left.

A replayed job reads its recording from `<job>/replay/recording.jsonl` (the host copies it
there before the job starts: `stage_recording`). The CLI makes new session ids on every run,
so each new session is paired with a recorded one: the first unpaired recorded session with a
request of the same shape, else the next unpaired one in recorded order. Within a session a
request gets the earliest recorded response not served yet whose request had its shape —
errors, cut streams and all, so the CLI retries exactly as it did (a retry has its request's
shape, and comes after it) — the shape being:

    model, message count, the tool_use ids its tool results answer, the prompt (when the last
    message is the workflow's text rather than tool output) and the system prompt (the agent's
    instructions).

Not simply the n-th response to the n-th request: the CLI asks the model for a session's title
beside the agent's first turn, in the same session, and the two race; the recording keeps them
in the order their answers ended, the next run may send them the other way round. Each has its
own shape (the title's prompt and system prompt are the CLI's), so each still gets its own
answer, and the agent's turns still come in their recorded order.

A request that matches no response left is the divergence (compared, to say where, with the
earliest one left of the same system prompt, else the earliest left): written to `<job>/logs/replay.json` and answered with a
409 `invalid_request_error` that the CLI does not retry and flower classifies as fatal; every
later request of the job gets the same answer. `logs/replay.json` also says how much of the
recording was served, so a run that stops early is visible too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flower.scripted import ParsedRequest, ResponsePlan
from flower.scripted.responder import estimate_tokens
from flower_batch.gateway.metering import replace_durably
from flower_batch.gateway.recording import RECORDING, REPLAY_DIR, STATE, read_recording, request_summary
from flower_batch.gateway.server.routing import job_of

DIVERGED_STATUS = 409
CUT_OUTCOMES = ("cut", "upstream-cut", "client-gone")


@dataclass
class Divergence:
    session_index: int  # 1-based, in recorded order (0: no recorded session left)
    request_index: int  # 1-based within the session
    exchange: int | None  # the recording's seq of the expected exchange
    field: str
    recorded: Any
    got: Any
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_index": self.session_index,
            "request_index": self.request_index,
            "exchange": self.exchange,
            "field": self.field,
            "recorded": self.recorded,
            "got": self.got,
            "message": self.message,
        }


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def compare_shapes(recorded: Mapping[str, Any], got: Mapping[str, Any]) -> tuple[str, Any, Any] | None:
    """The first field where a request differs from the recorded one, as (field, recorded, got)."""
    checks: list[tuple[str, str]] = [
        ("model", "model"),
        ("n_messages", "message count"),
        ("tool_result_ids", "tool results (tool_use ids)"),
        ("prompt_sha", "prompt"),
        ("system_sha", "system prompt (the agent's instructions)"),
    ]
    for key, label in checks:
        want, have = recorded.get(key), got.get(key)
        if want != have:
            if key == "prompt_sha":
                return label, recorded.get("prompt_head"), got.get("prompt_head")
            return label, want, have
    return None


class JobReplay:
    """The replay of one job's recording. Thread-safe."""

    def __init__(self, job: str, recording: list[dict[str, Any]], logs_dir: Path) -> None:
        self.job = job
        self.logs_dir = Path(logs_dir)
        entries = [e for e in recording if e.get("endpoint") == "messages"]
        self.total = len(entries)
        self.order: list[str] = []
        self.sessions: dict[str, list[dict[str, Any]]] = {}
        for entry in entries:
            sid = str((entry.get("request") or {}).get("session") or "")
            if sid not in self.sessions:
                self.order.append(sid)
                self.sessions[sid] = []
            self.sessions[sid].append(entry)
        self.pairs: dict[str, str] = {}  # live session -> recorded session
        self.left: dict[str, list[int]] = {sid: list(range(len(self.sessions[sid]))) for sid in self.order}
        self.served = 0
        self.divergence: Divergence | None = None
        self._lock = threading.Lock()
        self._save()

    def respond(self, request: ParsedRequest) -> ResponsePlan:
        got = request_summary(request)
        with self._lock:
            if self.divergence is None:
                entry = self._next(request.session, got)
                if entry is not None:
                    self.served += 1
                    self._save()
                    return plan_from(entry)
                self._save()
            assert self.divergence is not None
            return _diverged_plan(self.job, self.divergence)

    def _next(self, live: str, got: dict[str, Any]) -> dict[str, Any] | None:
        recorded = self.pairs.get(live)
        if recorded is None:
            recorded = self._pair(got)
            if recorded is None:
                self._diverge(
                    0,
                    1,
                    None,
                    "session",
                    f"{len(self.order)} sessions",
                    "one more",
                    f"a new session started, but all {len(self.order)} recorded sessions are taken",
                )
                return None
            self.pairs[live] = recorded
        return self._match(recorded, got)

    def _match(self, recorded: str, got: dict[str, Any]) -> dict[str, Any] | None:
        """The earliest response of the recorded session not served yet whose request had this
        shape, taken; else None, with the divergence said."""
        index = self.order.index(recorded) + 1
        entries, left = self.sessions[recorded], self.left[recorded]
        shapes = {n: compare_shapes(entries[n].get("request") or {}, got) for n in left}
        n = next((n for n in left if shapes[n] is None), None)
        if n is not None:
            left.remove(n)
            return entries[n]
        if not left:
            asked = len(entries) + 1
            self._diverge(
                index,
                asked,
                None,
                "request count",
                len(entries),
                asked,
                f"session {index} sent request {asked}, but the recording has only {len(entries)} in it",
            )
            return None
        # Said against the earliest one left from the same asker (the agent, or the CLI's title).
        same_asker = (
            n for n in left if (entries[n].get("request") or {}).get("system_sha") == got.get("system_sha")
        )
        n = next(same_asker, left[0])
        mismatch = shapes[n]
        assert mismatch is not None  # none of those left matched
        field, want, have = mismatch
        self._diverge(
            index,
            n + 1,
            entries[n].get("seq"),
            field,
            want,
            have,
            f"session {index}, request {n + 1} (exchange {entries[n].get('seq')} of the recording): "
            f"{field} recorded {_short(want)}, got {_short(have)}",
        )
        return None

    def _pair(self, got: dict[str, Any]) -> str | None:
        free = [sid for sid in self.order if sid not in self.pairs.values()]
        for sid in free:  # a request of the same shape first: robust to sessions starting in another order
            if any(compare_shapes(e.get("request") or {}, got) is None for e in self.sessions[sid]):
                return sid
        return free[0] if free else None

    def _diverge(
        self,
        session_index: int,
        request_index: int,
        exchange: int | None,
        field: str,
        recorded: Any,
        got: Any,
        detail: str,
    ) -> None:
        self.divergence = Divergence(
            session_index, request_index, exchange, field, recorded, got, f"replay diverged at {detail}"
        )

    def state(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "recorded": self.total,
            "served": self.served,
            "sessions": len(self.order),
            "divergence": self.divergence.to_dict() if self.divergence else None,
            "updated_at": round(time.time(), 3),
        }

    def _save(self) -> None:
        replace_durably(self.logs_dir / STATE, self.state())


def plan_from(entry: Mapping[str, Any]) -> ResponsePlan:
    """The recorded answer, as a plan: the same events, status and ending."""
    response = entry.get("response") or {}
    status = int(response.get("status") or 0)
    headers = dict(response.get("headers") or {})
    outcome = entry.get("outcome")
    rule = f"replay:{entry.get('seq')}"
    events = response.get("events")
    if outcome in ("dropped", "outage"):
        return ResponsePlan.drop(rule=rule)  # an outage is replayed as a drop: the gateway serves others too
    if events is not None:
        pairs = [(str(name), data) for name, data in events]
        cut = len(pairs) if outcome in CUT_OUTCOMES else None
        return ResponsePlan.sse(pairs, status=status or 200, headers=headers, cut_after=cut, rule=rule)
    return ResponsePlan.json(response.get("json"), status=status or 200, headers=headers, rule=rule)


def _diverged_plan(job: str, divergence: Divergence) -> ResponsePlan:
    message = (
        f"flower-batch replay of job {job}: invalid request for this replay — {divergence.message}. "
        "The run no longer follows the recording; see logs/replay.json"
    )
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return ResponsePlan.json(
        body, status=DIVERGED_STATUS, headers={"x-should-retry": "false"}, rule="replay:diverged"
    )


class ReplayResponder:
    """Replays, per job, the recording staged in `<batch>/<job>/replay/recording.jsonl`."""

    def __init__(self, batch_dir: Path) -> None:
        self.batch_dir = Path(batch_dir)
        self._jobs: dict[str, JobReplay | None] = {}
        self._lock = threading.Lock()

    def _job(self, job: str) -> JobReplay | None:
        with self._lock:
            if job not in self._jobs:
                path = self.batch_dir / job / REPLAY_DIR / RECORDING
                self._jobs[job] = (
                    JobReplay(job, read_recording(path), self.batch_dir / job / "logs")
                    if path.is_file()
                    else None
                )
            return self._jobs[job]

    def respond(self, request: ParsedRequest) -> ResponsePlan:
        if request.endpoint == "count_tokens":
            return ResponsePlan.json(
                {"input_tokens": estimate_tokens(request.body)}, rule="replay:count_tokens"
            )
        job = job_of(request.prefix) or ""
        replay = self._job(job)
        if replay is None:
            return ResponsePlan.error(
                404,
                f"flower-batch replay: job {job} has no recording to replay (replay/{RECORDING} is missing)",
                rule="replay:no-recording",
            )
        return replay.respond(request)
