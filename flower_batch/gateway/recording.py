"""The job's recording: every exchange with the model, in every gateway mode.

`<job>/logs/recording.jsonl`, one line per exchange, appended (and fsynced) when the exchange
ends — normally, cut, or because the job went away:

    {"format": "flower-batch/recording@1", "seq", "t", "t_end", "source", "endpoint",
     "request": {session, nth, model, stream, n_messages, tool_result_ids, prompt_sha,
                 prompt_head, system_sha, tools},
     "response": {status, headers, events: [[name, data], ...] | null, json: ... | null},
     "outcome": stream | response | cut | dropped | outage | upstream-cut | client-gone | refused}

The request is kept as a summary (its shape, and hashes of the texts that steer it), the
response in full: that is what replay re-serves and what it checks the next run against.
No header with a secret is ever kept (ParsedRequest redacts them when it parses).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flower_batch.errors import RecordingFormatError, RecordingMissing

from .metering import append_durably, read_lines

if TYPE_CHECKING:  # the host side reads recordings too, and must not pay for importing flower
    from flower.scripted import ParsedRequest

RECORDING = "recording.jsonl"
REPLAY_DIR = "replay"  # <job>/replay/recording.jsonl: what a replayed job is served
STATE = "replay.json"  # <job>/logs/replay.json: how the replay went
FORMAT = "flower-batch/recording@1"
KEPT_RESPONSE_HEADERS = ("retry-after", "x-should-retry")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def tool_result_ids(request: ParsedRequest) -> list[str]:
    """tool_use ids answered by the last user message, in order."""
    msg = request.last_user_message
    content = msg.get("content") if msg else None
    if not isinstance(content, list):
        return []
    return [
        str(b.get("tool_use_id", ""))
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


def request_summary(request: ParsedRequest) -> dict[str, Any]:
    """The shape of a request, as recorded and as replay compares it.

    `prompt_sha` hashes the last user text only when it is not a tool result: prompts come from
    the workflow (deterministic), tool output may carry timestamps and must not count.
    """
    request.parse()  # a proxied request's body is parsed after its answer, or here if sooner
    prompt = (
        request.last_user_text if request.endpoint == "messages" and not request.last_is_tool_result else ""
    )
    tools = request.body.get("tools")
    return {
        "session": request.session,
        "nth": request.nth,
        "model": request.model,
        "stream": request.stream,
        "n_messages": len(request.messages),
        "tool_result_ids": tool_result_ids(request),
        "prompt_sha": _sha(prompt) if prompt else None,
        "prompt_head": prompt[:160] if prompt else None,
        "system_sha": _sha(request.system_text) if request.system_text else None,
        "tools": [t.get("name") for t in tools if isinstance(t, dict)] if isinstance(tools, list) else [],
    }


def kept_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {
        k: v
        for k, v in headers.items()
        if k.lower() in KEPT_RESPONSE_HEADERS or k.lower().startswith("anthropic-ratelimit")
    }


class Recorder:
    """Appends exchanges to `<batch_dir>/<job>/logs/recording.jsonl`. Thread-safe."""

    def __init__(self, batch_dir: Path, source: str) -> None:
        self.batch_dir = Path(batch_dir)
        self.source = source
        self._lock = threading.Lock()
        self._seq: dict[str, int] = {}

    def path_for(self, job: str) -> Path:
        return self.batch_dir / job / "logs" / RECORDING

    def append(
        self,
        job: str,
        *,
        request: dict[str, Any],
        endpoint: str | None,
        status: int,
        outcome: str,
        events: list[Any] | None = None,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
        started: float,
        source: str | None = None,
    ) -> None:
        with self._lock:
            path = self.path_for(job)
            if job not in self._seq or not path.exists():
                self._seq[job] = len(read_lines(path))
            self._seq[job] += 1
            entry = {
                "format": FORMAT,
                "seq": self._seq[job],
                "t": round(started, 3),
                "t_end": round(time.time(), 3),
                "source": source or self.source,
                "endpoint": endpoint,
                "request": request,
                "response": {
                    "status": status,
                    "headers": kept_headers(headers or {}),
                    "events": events,
                    "json": json_body,
                },
                "outcome": outcome,
            }
            append_durably(path, entry)


def read_recording(path: Path) -> list[dict[str, Any]]:
    """The exchanges of a recording.jsonl (torn last line skipped), oldest first. A line of
    another format, or of a newer one, is refused (RecordingFormatError, one line): replaying
    without it would diverge at that exchange, for a reason nobody could see."""
    entries = read_lines(Path(path))
    for n, entry in enumerate(entries, 1):
        problem = format_problem(entry.get("format"))
        if problem:
            raise RecordingFormatError(f"{path}: exchange {n} {problem}")
    return entries


def format_problem(fmt: Any) -> str | None:
    """Why a recording line of format `fmt` cannot be replayed, or None."""
    if fmt == FORMAT:
        return None
    if isinstance(fmt, str) and fmt.startswith(FORMAT.rsplit("@", 1)[0] + "@"):
        return f"was written as {fmt}, newer than this flower-batch reads ({FORMAT}): upgrade flower-batch"
    return f"is not a flower-batch recording (format {fmt!r}, expected {FORMAT})"


def recording_source(path: Path) -> Path:
    """The recording.jsonl a `recording` setting names: a file, or a recorded job's folder."""
    path = Path(path)
    if path.is_dir():
        for candidate in (path / "logs" / RECORDING, path / RECORDING):
            if candidate.is_file():
                return candidate
        raise RecordingMissing(f"{path} holds no recording to replay (looked for logs/{RECORDING})")
    if not path.is_file():
        raise RecordingMissing(f"no recording to replay at {path}")
    return path


def stage_recording(source: Path, job_root: Path) -> Path:
    """Copy the recording a job will replay into its folder (kept with the job)."""
    found = recording_source(source)
    dest = Path(job_root) / REPLAY_DIR / RECORDING
    dest.parent.mkdir(parents=True, exist_ok=True)
    if found.resolve() != dest.resolve():
        shutil.copyfile(found, dest)
    return dest


def read_state(logs_dir: Path) -> dict[str, Any] | None:
    """`logs/replay.json` of a replayed job: how much was served, and the divergence if any."""
    try:
        data = json.loads((Path(logs_dir) / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
