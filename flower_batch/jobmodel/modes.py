"""The gateway modes a job may name: one enum, and one table of what each mode is to the job
model — its label for people (every output says which model produced it), the file it needs
(a scripted mode's scenario, a replay's recording) and whether it serves a recording.

A fact of the job model, so a spec can say its label and check its needs without importing the
gateway. The gateway keeps the two other tables keyed by this enum: what each mode needs of the
host (gateway/host/setup.py) and the responder that serves it (gateway/server/responders.py).
Nothing else compares a mode with a string: it asks these tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal


class GatewayMode(StrEnum):
    ANTHROPIC = "anthropic"
    SCRIPTED = "scripted"
    REPLAY = "replay"

    @property
    def rules(self) -> ModeRules:
        return RULES[self]

    @property
    def label(self) -> str:
        return RULES[self].label


@dataclass(frozen=True)
class ModeRules:
    label: str
    needs: Literal["scenario", "recording"] | None  # the GatewaySpec file the mode cannot run without
    needs_what: str = ""  # that file, for people
    needs_example: str = ""  # how jobs.toml's gateway table names it
    gateways_file: bool = False  # the needed file is the gateway's (copied next to it), not each job's
    replays: bool = False  # serves a recording: metered at $0, and its replay state says if the run diverged


RULES: dict[GatewayMode, ModeRules] = {
    GatewayMode.ANTHROPIC: ModeRules(label="Anthropic API", needs=None),
    GatewayMode.SCRIPTED: ModeRules(
        label="scripted model",
        needs="scenario",
        needs_what="a scenario file",
        needs_example="path/to/scenario",
        gateways_file=True,
    ),
    GatewayMode.REPLAY: ModeRules(
        label="replayed recording",
        needs="recording",
        needs_what="the recorded job to replay",
        needs_example="path/to/job-folder",
        replays=True,
    ),
}
MODES = tuple(mode.value for mode in GatewayMode)
MODE_LABELS = {mode.value: rules.label for mode, rules in RULES.items()}
DEFAULT_MODE = GatewayMode.ANTHROPIC


def parse_mode(text: object) -> GatewayMode | None:
    """The mode a string names, or None (the caller says where the bad name was)."""
    if not isinstance(text, str):
        return None
    try:
        return GatewayMode(text)
    except ValueError:
        return None


def mode_label(mode: str) -> str:
    return MODE_LABELS.get(mode, mode)


def unknown_mode(text: object) -> str:
    shown = f'"{text}"' if isinstance(text, str) else repr(text)
    return f"unknown gateway mode {shown}; use one of {', '.join(MODES)}"


def missing_need(mode: GatewayMode, given: object | None) -> str | None:
    """The one check of a mode's need: "{mode} mode needs {what}" when the file it cannot run
    without (`given`: the scenario or recording, or None) is not there, else None."""
    rules = RULES[mode]
    if rules.needs is None or given:
        return None
    return f"{mode} mode needs {rules.needs_what}"
