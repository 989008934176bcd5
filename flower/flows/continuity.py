"""runs/continuity.json: for each step of the last run, whether it continued a session or
started fresh, and why.

A persistent workflow falls back to a fresh session, silently, when lineage.json is missing,
unreadable, written for another workspace, or names a session the store no longer has (the
fallback must never stop the work). Silent on the terminal is right; silent in the
records is not: whoever wakes a job needs to know the conversation was not continued. The
Workflow writes this file as it decides each step, so a run killed mid-way still says it::

    {"format": "flower/continuity@1", "run": "<run id>", "stamp": "<FLOWER_RUN_STAMP>",
     "steps": [{"step": "fix", "continued": false, "session": "9f1c…",
                "reason": "session 9f1c2a3b… is not in sessions.db"}]}

Writing is bookkeeping: it never raises.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from flower.catalogue.names import CONTINUITY_FILE, MANIFEST_FILE
from flower.fileio import write_atomic
from flower.flows.lineage import Lineage
from flower.full_disk import FullDisk

CONTINUITY_FORMAT = "flower/continuity@1"


def decide(
    step: str,
    lineage: Lineage | None,
    *,
    resume_from: str | None = None,
    resumed_session: str | None = None,
    store_was_new: bool = False,
    first_run: bool = False,
) -> dict[str, Any]:
    """The entry for one step: {"step", "continued", "session", "reason"}."""

    def entry(continued: bool, session: str | None, reason: str) -> dict[str, Any]:
        return {"step": step, "continued": continued, "session": session, "reason": reason}

    if resume_from is not None:
        return entry(True, resumed_session, f"continued step {resume_from}'s session (resume_from)")
    if lineage is None:
        return entry(False, None, "continuous=False (--fresh): every step starts a new session")
    sid = lineage.steps.get(step)
    if sid:
        return entry(True, sid, f"continued session {short(sid)} (lineage.json)")
    if step in lineage.dropped:
        gone = lineage.dropped[step]
        why = f"session {short(gone)} is not in sessions.db"
        if store_was_new:
            why += " (sessions.db was missing: a new store was started)"
        return entry(False, gone, why)
    if lineage.problem:
        if lineage.problem == "lineage.json missing" and first_run:
            return entry(False, None, "first run: nothing to continue")
        return entry(False, None, lineage.problem)
    return entry(False, None, "no earlier session of this step in lineage.json")


def short(session_id: str) -> str:
    return f"{session_id[:8]}…" if len(session_id) > 8 else session_id


class ContinuityLog:
    """This run's entries, rewritten whole after each one (atomically)."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        run_id: str,
        stamp: str | None = None,
        full_disk: FullDisk | None = None,
    ) -> None:
        self.path = Path(run_dir) / CONTINUITY_FILE
        self.full_disk = full_disk
        self.run_id = run_id
        self.stamp = stamp
        self.steps: list[dict[str, Any]] = []

    def add(self, entry: dict[str, Any]) -> None:
        self.steps = [e for e in self.steps if e.get("step") != entry.get("step")] + [entry]
        data = {
            "format": CONTINUITY_FORMAT,
            "run": self.run_id,
            "stamp": self.stamp,
            "steps": self.steps,
        }
        try:
            write_atomic(self.path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        except OSError as exc:
            if self.full_disk is not None:
                self.full_disk.note(CONTINUITY_FILE, exc)


def read_continuity(
    run_dir: str | os.PathLike[str], *, stamp: str | None = None
) -> list[dict[str, Any]] | None:
    """The entries of the last run, or None: missing, unreadable, or (with `stamp`) another run's."""
    try:
        text = (Path(run_dir) / CONTINUITY_FILE).read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    return parse_continuity(text, stamp=stamp)


def parse_continuity(text: str, *, stamp: str | None = None) -> list[dict[str, Any]] | None:
    """`read_continuity`'s checks on the file's text."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("format") != CONTINUITY_FORMAT:
        return None
    if stamp is not None and data.get("stamp") != stamp:
        return None
    steps = data.get("steps")
    if not isinstance(steps, list):
        return None
    return [
        {
            "step": str(e.get("step")),
            "continued": bool(e.get("continued")),
            "session": e.get("session") if isinstance(e.get("session"), str) else None,
            "reason": str(e.get("reason") or ""),
        }
        for e in steps
        if isinstance(e, dict)
    ]


def first_run(run_dir: str | os.PathLike[str]) -> bool:
    """Nothing ran in this run directory before (no manifest rows of an earlier run)."""
    return not (Path(run_dir) / MANIFEST_FILE).is_file()
