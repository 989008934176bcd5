"""The test rig: the real SDK and the real bundled CLI against the project's scripted model."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from flower.runtime import Runtime
from flower.scripted import Scenario, ScriptedServer


@contextlib.contextmanager
def scripted(tmp_path: Path, scenario: dict) -> Iterator[ScriptedServer]:
    with ScriptedServer(Scenario.from_dict(scenario), log_path=tmp_path / "model.jsonl") as srv:
        yield srv


def runtime(tmp_path: Path, srv: ScriptedServer, **kw) -> Runtime:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    kw.setdefault("resilience", False)
    return Runtime(workspace=ws, run_dir=tmp_path / "runs", env=srv.env(tmp_path / "cfg"), **kw)


def texts_of(request: dict) -> str:
    """All text a logged request carried in its messages (user and assistant, tool results too)."""
    out: list[str] = []
    for msg in request["body"].get("messages", []):
        content = msg.get("content")
        if isinstance(content, str):
            out.append(content)
            continue
        for block in content or []:
            if block.get("type") == "text":
                out.append(block.get("text", ""))
            elif block.get("type") == "tool_result":
                c = block.get("content")
                if isinstance(c, str):
                    out.append(c)
                else:
                    out.extend(b.get("text", "") for b in c or [] if isinstance(b, dict))
    return "\n".join(out)


def message_requests(srv: ScriptedServer) -> list[dict]:
    return [r for r in srv.requests if r["path"].split("?")[0].endswith("/v1/messages")]
