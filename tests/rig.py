"""The test rig: the real SDK and the real bundled CLI against the project's scripted model."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from flower.runtime.engine import Runtime
from flower.scripted import Scenario, ScriptedServer
from flower.scripted.request import content_text


@contextlib.contextmanager
def scripted(tmp_path: Path, scenario: dict) -> Iterator[ScriptedServer]:
    with ScriptedServer(
        Scenario.from_dict(scenario), log_path=tmp_path / "model.jsonl", keep_requests=True
    ) as srv:
        yield srv


def runtime(tmp_path: Path, srv: ScriptedServer, **kw) -> Runtime:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    kw.setdefault("resilience", False)
    return Runtime(workspace=ws, run_dir=tmp_path / "runs", env=srv.env(tmp_path / "cfg"), **kw)


def texts_of(request: dict) -> str:
    """All text a logged request carried in its messages (user and assistant, tool results too)."""
    return "\n".join(
        filter(None, (content_text(m.get("content")) for m in request["body"].get("messages", [])))
    )


def message_requests(srv: ScriptedServer) -> list[dict]:
    return [r for r in srv.requests if r["path"].split("?")[0].endswith("/v1/messages")]
