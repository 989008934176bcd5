"""lineage.json: which session each step name used last, so the next process continues it.

Two invariants (the bookkeeping must never stop the work):
1. A session id is written the moment it is known, atomically (.tmp + replace); OSError is swallowed
   because bookkeeping must never kill the work. A full disk is noted (`full_disk`, flower.full_disk):
   the workflow stops before its next step and says so, and the whole table is written again by
   the next save that succeeds.
2. Whatever doesn't match (moved workspace, dead session, corrupt file) counts as absent, silently.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from flower.catalogue.names import LINEAGE_FILE
from flower.fileio import write_atomic
from flower.full_disk import FullDisk


class Lineage:
    FILE = LINEAGE_FILE

    def __init__(self, run_dir: str | os.PathLike[str], workspace: str | os.PathLike[str]) -> None:
        self.path = Path(run_dir) / self.FILE
        self.workspace = str(Path(workspace).resolve())
        self.woke = 0
        self.steps: dict[str, str] = {}
        self.full_disk: FullDisk | None = None  # set by the workflow that writes it
        # Why what is on disk was not used, for reports (the fallback itself stays silent):
        # `problem` for the whole file, `dropped` for steps whose session is gone.
        self.problem: str | None = None
        self.dropped: dict[str, str] = {}

    @classmethod
    def load(
        cls,
        run_dir: str | os.PathLike[str],
        workspace: str | os.PathLike[str],
        has_session: Callable[[str], bool] | None = None,
    ) -> Lineage:
        """Read lineage.json; keep only steps whose session still exists. Never raises."""
        lin = cls(run_dir, workspace)
        raw = read_raw(lin.path)
        if raw is None:
            lin.problem = _why_unusable(lin.path)
            return lin
        if raw.get("workspace") != lin.workspace:
            # The workspace guard: a moved or copied project starts fresh.
            lin.problem = f"workspace guard: lineage.json was written for {raw.get('workspace')!r}, not {lin.workspace!r}"
            return lin
        woke = raw.get("woke", 0)
        lin.woke = woke if isinstance(woke, int) and woke >= 0 else 0
        steps = raw.get("steps")
        if isinstance(steps, dict):
            for name, sid in steps.items():
                if not (isinstance(name, str) and isinstance(sid, str) and sid):
                    continue
                if _alive(has_session, sid):
                    lin.steps[name] = sid
                else:
                    lin.dropped[name] = sid
        else:
            lin.problem = "lineage.json unreadable: it has no steps table"
        return lin

    @property
    def waking(self) -> bool:
        return bool(self.steps)

    def record(self, step: str, session_id: str) -> None:
        # Suffixed attempt names (X#retry1, X#round2, X·判定#1) are never cross-process keys.
        if not session_id or "#" in step or "·" in step:
            return
        self.steps[step] = session_id
        self.save()

    def bump_woke(self) -> int:
        self.woke += 1
        self.save()
        return self.woke

    def save(self) -> None:
        data = {"workspace": self.workspace, "woke": self.woke, "steps": self.steps}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        except OSError as exc:
            if self.full_disk is not None:
                self.full_disk.note(self.FILE, exc)

    def archive(self, into: str | os.PathLike[str], extra: Iterable[str | os.PathLike[str]] = ()) -> Path:
        """Move lineage.json and the given files into `into/<YYYYmmdd-HHMMSS>/`; reset."""
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        dest = Path(into) / stamp
        n = 1
        while dest.exists():  # two archives in one second must not mix (or overwrite) their files
            n += 1
            dest = Path(into) / f"{stamp}-{n}"
        dest.mkdir(parents=True)
        for item in [self.path, *map(Path, extra)]:
            if item.exists():
                shutil.move(str(item), str(dest / item.name))
        self.steps = {}
        self.woke = 0
        return dest


def _alive(has_session: Callable[[str], bool] | None, sid: str) -> bool:
    if has_session is None:
        return True
    try:
        return bool(has_session(sid))
    except Exception:  # noqa: BLE001 — an unreadable store means "absent", never an error
        return False


def _why_unusable(path: Path) -> str:
    """Why read_raw() gave nothing: missing, or unreadable (and how)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "lineage.json missing"
    except (OSError, UnicodeDecodeError) as exc:
        return f"lineage.json unreadable: {type(exc).__name__}: {exc}"
    try:
        json.loads(text)
    except ValueError as exc:
        return f"lineage.json unreadable: {exc}"
    return "lineage.json unreadable: not a JSON object"


def read_raw(path: Path) -> dict[str, Any] | None:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return raw if isinstance(raw, dict) else None
