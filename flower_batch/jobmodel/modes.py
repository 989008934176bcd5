"""The gateway modes a job may name, and how each is named to people: every output (tables,
reports, `show`) says which model produced it. A fact of the job model, so a spec can say its
label without importing the gateway; what each mode needs of the host is gateway/host/setup.py."""

from __future__ import annotations

MODES = ("scripted", "anthropic", "replay")
MODE_LABELS = {"scripted": "scripted model", "replay": "replayed recording", "anthropic": "Anthropic API"}


def mode_label(mode: str) -> str:
    return MODE_LABELS.get(mode, mode)
