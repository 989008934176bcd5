"""The run directory's sessions: sessions.db, wrapped for resume (pruned, trimmed on load).

The CLI reads a resumed session through the PruningSessionStore (flower.context.pruning): a
cleaned copy, never the stored rows. The queries a workflow asks (does this session exist, how
full is its context) read the SQLite store underneath.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from claude_agent_sdk import project_key_for_directory

from flower.catalogue.names import SESSIONS_DB
from flower.context.store import SQLiteSessionStore


class Sessions:
    """sessions.db of one run directory, for one workspace (the CLI's project key)."""

    def __init__(
        self, run_dir: Path, workspace: Path, *, trim: bool, ephemeral: bool, keep_denials: int
    ) -> None:
        self.project_key = project_key_for_directory(str(workspace))
        # Reported when a step cannot continue: its session was lost with the whole store.
        self.was_new = not (run_dir / SESSIONS_DB).is_file()
        self.sqlite = SQLiteSessionStore(run_dir / SESSIONS_DB)
        self.store: Any = _resume_store(self.sqlite, run_dir, trim, ephemeral, keep_denials)

    def has(self, session_id: str) -> bool:
        return bool(session_id) and self.sqlite.has_session(self.project_key, session_id)

    def context_of(self, session_id: str) -> int | None:
        return self.sqlite.last_context_tokens(self.project_key, session_id)

    def close(self) -> None:
        self.sqlite.close()


def _resume_store(
    sqlite: SQLiteSessionStore, run_dir: Path, trim: bool, ephemeral: bool, keep_denials: int
) -> Any:
    from flower.context.pruning import PruningSessionStore

    trimmer = None
    if trim:
        from flower.context.trim import Trimmer

        trimmer = Trimmer(run_dir / "trimmed")
    # PruningSessionStore.__new__ picks the subclass with the optional methods the inner
    # store has; mypy only sees the abstract base.
    return PruningSessionStore(  # type: ignore[abstract]
        sqlite, ephemeral=ephemeral, keep_denials=keep_denials, trim=trimmer
    )
