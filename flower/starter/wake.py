"""Waking up where flower worked before: what is on disk, and the line that reports it.

* `wake_state()` is a read-only probe: it writes not one byte — sessions.db is opened
  read-only (``immutable`` when no writer has a WAL open, so not even -wal/-shm files appear).
* `banner()` / `wake_line()`: ``<- 在 ~/proj 接上上次  需求已确认 · 目标 15 条 · 干活上下文 80.2K · 第 3 次唤醒``.
  需求已确认 when the brief has its four sections, 目标 N 条 when the checklist is not empty,
  the context figure when sessions.db has the step's last main-thread call (its input + cache
  tokens). Reporting the context is deliberate: a person who sees it grow can start over
  (`--new`) before the window is full.
* `step_header()`: ``== 干活 ====…  3/3  <- 接上次 · 第 3 次唤醒``.
* `start_over()` (``--new`` / ``/new``) archives lineage.json, 需求.md and 目标.md together
  into ``<notes>/archive/<YYYYmmdd-HHMMSS>/``; sessions.db is the archive of transcripts and is
  left alone.

Where 需求.md and 目标.md live: the workbench's notes (``<workspace>/.flower/notes/``), else the
workspace root; pass explicit paths to override.
"""

from __future__ import annotations

import os
import sqlite3
import unicodedata
from pathlib import Path
from typing import Any

from claude_agent_sdk import project_key_for_directory

from flower.catalogue.names import BRIEF_FILE, GOAL_FILE, SESSIONS_DB
from flower.catalogue.names import WORK as WORK_STEP
from flower.catalogue.terminal import (
    BANNER,
    BANNER_BRIEF,
    BANNER_CHECKS,
    BANNER_CONTEXT,
    BANNER_WOKE,
    NOTICE_CONTEXT,
    NOTICE_DEGRADED,
    NOTICE_HANDED_OVER,
    NOTICE_HANDOFF_DUE,
    NOTICE_LIMITS,
    NOTICE_OFFLINE,
    NOTICE_OFFLINE_VIA,
    NOTICE_TIME_UP,
    WOKE_MARK,
    step_label,
)
from flower.context.store import context_from_newest, store_key
from flower.context.workbench import notes_dir
from flower.events import (
    ContextWarning,
    Event,
    HandedOver,
    HandoffDegraded,
    HandoffDue,
    LimitsTold,
    Offline,
    TimeUp,
)
from flower.flows.lineage import Lineage
from flower.starter.brief import Brief, parse_brief
from flower.starter.goal import parse_goal


def find_file(workspace: str | os.PathLike[str], name: str) -> Path | None:
    """``<workspace>/.flower/notes/<name>``, else ``<workspace>/<name>``; None if neither exists."""
    ws = Path(workspace).resolve()
    for candidate in (notes_dir(ws) / name, ws / name):
        if candidate.is_file():
            return candidate
    return None


def wake_state(
    workspace: str | os.PathLike[str] = ".",
    *,
    run_dir: str | os.PathLike[str] = "runs",
    brief_path: str | os.PathLike[str] | None = None,
    goal_path: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """``{"waking", "brief", "goal", "checks", "woke", "steps"}`` for this directory; writes nothing.

    waking: 需求.md exists with all four sections. brief: the parsed brief (a dict of the four
    sections) or None. goal: the goal statement or None. checks: how many checks 目标.md lists.
    woke: how many wakes so far (0 = never ran here). steps: step name -> session id, only
    sessions that still exist in sessions.db, only if the workspace matches.
    """
    ws = Path(workspace).resolve()
    brief = _read_brief(Path(brief_path) if brief_path else find_file(ws, BRIEF_FILE))
    goal_text = _read(Path(goal_path) if goal_path else find_file(ws, GOAL_FILE))
    statement, checks = _parse_goal(goal_text) if goal_text is not None else (None, [])
    with ReadOnlySessions(Path(run_dir).resolve() / SESSIONS_DB, ws) as sessions:
        lineage = Lineage.load(Path(run_dir).resolve(), ws, sessions.has_session)
    return {
        "waking": bool(brief is not None and brief.complete),
        "brief": brief,
        "goal": statement,
        "checks": len(checks),
        "woke": lineage.woke,
        "steps": dict(lineage.steps),
    }


def context_of(
    session_id: str, workspace: str | os.PathLike[str] = ".", *, run_dir: str | os.PathLike[str] = "runs"
) -> int | None:
    """The session's last main-thread context size from sessions.db (read-only), or None."""
    with ReadOnlySessions(Path(run_dir).resolve() / SESSIONS_DB, workspace) as sessions:
        return sessions.last_context_tokens(session_id)


def wake_line(
    workspace: str | os.PathLike[str] = ".",
    *,
    run_dir: str | os.PathLike[str] = "runs",
    state: dict[str, Any] | None = None,
    step: str | None = None,
    steps_order: list[str] | None = None,
) -> str | None:
    """The banner for this directory, or None when there is nothing to continue.

    The context reported is `step`'s, else 干活's, else that of the last of `steps_order` (the
    workflow's step names) that lineage knows, else of the last step lineage recorded.
    """
    state = state if state is not None else wake_state(workspace, run_dir=run_dir)
    if not state["steps"] and not state["waking"]:
        return None
    known = state["steps"]
    if step is None:
        if WORK_STEP in known:
            step = WORK_STEP
        elif steps_order:
            step = next((name for name in reversed(steps_order) if name in known), None)
        if step is None and known:
            step = list(known)[-1]
    context = context_of(known[step], workspace, run_dir=run_dir) if step in known else None
    return banner(state, workspace=workspace, context=context, context_step=step)


def banner(
    state: dict[str, Any],
    *,
    workspace: str | os.PathLike[str] = ".",
    context: int | None = None,
    context_step: str | None = WORK_STEP,
) -> str:
    """``<- 在 ~/proj 接上上次  需求已确认 · 目标 15 条 · 干活上下文 80.2K · 第 3 次唤醒``.

    The wake number is the one about to happen (state["woke"] + 1), the same the step
    headers of this run show.
    """
    parts: list[str] = []
    if state.get("waking"):
        parts.append(BANNER_BRIEF)
    if state.get("checks"):
        parts.append(BANNER_CHECKS.format(checks=state["checks"]))
    if context is not None:
        parts.append(
            BANNER_CONTEXT.format(step=step_label(context_step or ""), tokens=format_tokens(context))
        )
    parts.append(BANNER_WOKE.format(woke=int(state.get("woke") or 0) + 1))
    return BANNER.format(where=display_path(workspace)) + " · ".join(parts)


def step_header(
    name: str, index: int, total: int, *, resumed: bool = False, woke: int = 0, width: int = 40
) -> str:
    """``== 干活 ==============================  3/3  <- 接上次 · 第 3 次唤醒``."""
    head = f"== {name} "
    rule = "=" * max(4, width - _columns(head))
    tail = WOKE_MARK.format(woke=woke) if resumed else ""
    return f"{head}{rule}  {index}/{total}{tail}"


def start_over(
    workspace: str | os.PathLike[str] = ".",
    *,
    run_dir: str | os.PathLike[str] = "runs",
    brief_path: str | os.PathLike[str] | None = None,
    goal_path: str | os.PathLike[str] | None = None,
    into: str | os.PathLike[str] | None = None,
) -> Path:
    """``--new``: archive lineage.json, 需求.md and 目标.md into ``<notes>/archive/<stamp>/``
    and reset steps and woke. sessions.db is untouched. Returns the archive directory."""
    ws = Path(workspace).resolve()
    extra = [
        p
        for p in (
            Path(brief_path) if brief_path else find_file(ws, BRIEF_FILE),
            Path(goal_path) if goal_path else find_file(ws, GOAL_FILE),
        )
        if p is not None
    ]
    lineage = Lineage(Path(run_dir).resolve(), ws)
    return lineage.archive(Path(into) if into else notes_dir(ws) / "archive", extra=extra)


def format_tokens(n: int) -> str:
    """80213 -> "80.2K", 1_234_567 -> "1.23M", 950 -> "950"."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}K"
    return f"{n / 1_000_000:.2f}M"


def display_path(path: str | os.PathLike[str]) -> str:
    """The path with the home directory written as ~."""
    p = Path(path).resolve()
    try:
        rel = p.relative_to(Path.home().resolve())
    except (ValueError, RuntimeError):
        return str(p)
    return "~" if str(rel) == "." else f"~/{rel}"


class ReadOnlySessions:
    """The two sessions.db questions a wake needs, asked without writing anything.

    Opened ``immutable`` when no WAL file exists (no writer active: nothing is created next to
    the database), otherwise ``mode=ro`` (the -wal/-shm files already exist). A missing or
    unreadable database answers "no such session".
    """

    def __init__(self, path: str | os.PathLike[str], workspace: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.project_key = project_key_for_directory(str(Path(workspace).resolve()))
        self._conn: sqlite3.Connection | None = None

    def __enter__(self) -> ReadOnlySessions:
        if self.path.is_file():
            wal = self.path.with_name(self.path.name + "-wal")
            flag = "mode=ro" if wal.exists() else "immutable=1"
            try:
                self._conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?{flag}", uri=True)
            except sqlite3.Error:
                self._conn = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _key(self, session_id: str) -> str:
        return store_key({"project_key": self.project_key, "session_id": session_id})

    def has_session(self, session_id: str) -> bool:
        if self._conn is None or not session_id:
            return False
        try:
            row = self._conn.execute(
                "SELECT 1 FROM entries WHERE store_key = ? LIMIT 1", (self._key(session_id),)
            ).fetchone()
        except sqlite3.Error:
            return False
        return row is not None

    def last_context_tokens(self, session_id: str) -> int | None:
        """Same rule as SQLiteSessionStore.last_context_tokens: newest main-thread, non-synthetic
        assistant entry with usage."""
        if self._conn is None or not session_id:
            return None
        try:
            rows = self._conn.execute(
                "SELECT payload FROM entries WHERE store_key = ? ORDER BY seq DESC", (self._key(session_id),)
            )
            return context_from_newest(payload for (payload,) in rows)
        except (sqlite3.Error, ValueError):
            return None


def _read(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _read_brief(path: Path | None) -> Brief | None:
    text = _read(path)
    return parse_brief(text) if text is not None else None


def _parse_goal(text: str) -> tuple[str | None, list[str]]:
    goal = parse_goal(text)
    return goal.statement or None, list(goal.checks)


def _columns(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def notice(event: Event | None) -> str | None:
    """One line for the continuity events the runtime emits (None for other events)."""
    match event:
        case HandoffDue(context=context, at=at):
            return NOTICE_HANDOFF_DUE.format(context=format_tokens(context), at=format_tokens(at))
        case HandedOver(generation=generation, doc=doc):
            return NOTICE_HANDED_OVER.format(generation=generation, doc=doc)
        case HandoffDegraded():
            return NOTICE_DEGRADED
        case LimitsTold(text=text, summary=summary):
            return NOTICE_LIMITS.format(text=summary or " ".join(text.split()))
        case TimeUp(notes=notes, wrap_up_s=wrap_up_s):
            return NOTICE_TIME_UP.format(seconds=round(wrap_up_s), notes=notes)
        case ContextWarning(context=context, at=at):
            return NOTICE_CONTEXT.format(context=format_tokens(context), at=format_tokens(at))
        case Offline(host=host, port=port, via=None):
            return NOTICE_OFFLINE.format(host=host, port=port)
        case Offline(host=host, port=port, via=via):
            return NOTICE_OFFLINE_VIA.format(host=host, port=port, via=via)
    return None
