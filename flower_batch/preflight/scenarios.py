"""Every scenario and recording a run would serve, read by the gateway's own code before anything starts."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path

from flower_batch.errors import GatewayConfigError, RecordingFormatError, RecordingMissing
from flower_batch.jobmodel.modes import GatewayMode

from ..gateway.recording import read_recording, recording_source


def scenario_problems(paths: Iterable[Path]) -> list[str]:
    """One line per distinct scenario file the scripted gateway would refuse to load."""
    out: list[str] = []
    distinct = list(map(Path, dict.fromkeys(paths)))  # one line per file, not per job
    if not distinct:
        return out
    # Here, not at the top: the gateway's responders import the scripted model and the proxy,
    # a tenth of a second of every command that serves no scenario.
    from flower.scripted import ScenarioError
    from flower_batch.gateway.server.responders import mode_responder

    for path in distinct:
        try:
            # What the gateway container runs at start (gateway/server/__main__.py); the batch folder is
            # only read by replay mode, so a scratch one keeps the home untouched.
            with tempfile.TemporaryDirectory(prefix="flower-batch-preflight-") as scratch:
                mode_responder(GatewayMode.SCRIPTED, batch_dir=Path(scratch), scenario=str(path))
        except (ScenarioError, GatewayConfigError) as exc:
            out.append(" ".join(str(exc).split()))
    return out


def recording_problems(paths: Iterable[Path]) -> list[str]:
    """One line per distinct recording a replay gateway could not serve (missing, or of another
    format)."""
    out: list[str] = []
    for path in map(Path, dict.fromkeys(paths)):
        try:
            read_recording(recording_source(path))
        except (RecordingMissing, RecordingFormatError) as exc:
            out.append(" ".join(str(exc).split()))
    return out
