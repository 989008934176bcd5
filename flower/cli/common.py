"""What every `flower` command shares: the global options, one-line failures, exit codes, runtimes.

The global options (-w, -r, -v, -W, -T) are declared once here (`WorkspaceOption`, ...); the
app's group and every command take them (the commands through flower.cli.shared), so they work
before or after the subcommand (`flower -w DIR run flows.py:main` and `flower run flows.py:main -w DIR`).
"""

from __future__ import annotations

import contextlib
import signal
import sqlite3
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from flower import exitinfo
from flower.catalogue.names import SESSIONS_DB
from flower.cli import limits
from flower.full_disk import FullDisk
from flower.runtime.engine import Runtime

PERMISSION_MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto")
HELP = ("-h", "--help")

err = Console(stderr=True, soft_wrap=True)


class Globals:
    """The global options' values for this process (set while the command line is parsed)."""

    workspace: Path = Path(".")
    run_dir: Path = Path("runs")
    verbose: bool = False
    workbench: bool = False
    trim: bool = False
    environ: dict[str, str] = {}  # noqa: RUF012 - replaced whole by main(), never mutated
    """The process's environment, read once by main() where the process starts."""


G = Globals()


def leave(code: int, kind: str, reason: str, step: str | None = None) -> None:
    """The cause of this exit, in runs/.exit.json, stamped with $FLOWER_RUN_STAMP."""
    stamp = G.environ.get(exitinfo.STAMP_ENV) or None
    exitinfo.leave(G.run_dir, code=code, kind=kind, reason=reason, step=step, stamp=stamp)


# The global options, declared once. The group takes them with their defaults; each command
# takes them again with "not typed" defaults (None / False), so typing one after the
# subcommand overrides, and not typing it leaves what was typed before the subcommand.
WorkspaceOption = Annotated[
    Path | None,
    typer.Option("-w", "--workspace", show_default=False, help="the project directory the agent works in"),
]
RunDirOption = Annotated[
    Path | None,
    typer.Option(
        "-r",
        "--run-dir",
        show_default=False,
        help="where sessions.db, lineage.json and manifest.json live (relative to the current directory)",
    ),
]
VerboseOption = Annotated[bool, typer.Option("-v", "--verbose", help="show every tool call and message")]
WorkbenchOption = Annotated[
    bool,
    typer.Option(
        "-W", "--workbench", help="give the agent a workbench (.flower/) for scripts, artifacts and notes"
    ),
]
TrimOption = Annotated[
    bool, typer.Option("-T", "--trim", help="trim old large tool results on resume (content kept on disk)")
]


def set_globals(
    workspace: Path | None, run_dir: Path | None, verbose: bool, workbench: bool, trim: bool
) -> None:
    """Record the global options typed here; an option not typed (None / False) changes nothing."""
    if workspace is not None:
        G.workspace = workspace
    if run_dir is not None:
        G.run_dir = run_dir
    G.verbose, G.workbench, G.trim = G.verbose or verbose, G.workbench or workbench, G.trim or trim


def reset_globals() -> None:
    """Back to the defaults: each `main()` call starts from them (tests call main repeatedly)."""
    limits.ARGS.reset()
    G.workspace, G.run_dir, G.verbose, G.workbench, G.trim = Path("."), Path("runs"), False, False, False


def fail(message: str, code: int = 2, kind: str = "usage") -> NoReturn:
    """One red line on stderr, the cause in runs/.exit.json, exit `code`."""
    err.print(Text.assemble(("flower:", "red"), " ", message), highlight=False)
    leave(code=code, kind=kind, reason=message)
    raise typer.Exit(code)


WINDOW_ENV = "FLOWER_WINDOW"
WINDOW_HELP = (
    f"the model's context window in tokens, for the handoff threshold (default ${WINDOW_ENV}, else 200000)"
)


WindowOption = Annotated[int | None, typer.Option("--window", show_default=False, help=WINDOW_HELP)]


def window_or_env(window: int | None) -> int | None:
    """--window, else $FLOWER_WINDOW (how a job in a container gets one: `flower-batch run --env
    FLOWER_WINDOW=…` or `env` in jobs.toml), else None (the default window)."""
    if window is None:
        raw = G.environ.get(WINDOW_ENV, "").strip()
        if not raw:
            return None
        if not raw.isdigit() or int(raw) <= 0:
            fail(f"{WINDOW_ENV}={raw!r}: give the context window in tokens, e.g. {WINDOW_ENV}=200000")
        window = int(raw)
    if window <= 0:
        fail(f"--window {window}: give the context window in tokens, e.g. --window 200000")
    return window


def ended(ctx: dict[str, Any]) -> int:
    """The exit code of a workflow run, with its cause left in runs/.exit.json."""
    failure = exitinfo.step_failure(ctx)
    if failure is None:
        leave(code=0, kind="done", reason="every step passed")
        return 0
    kind, reason, step = failure
    if kind == "disk":  # not a step's failure the table shows: said in its one line
        err.print(Text.assemble(("flower:", "red"), " ", reason), highlight=False)
    leave(code=1, kind=kind, reason=reason, step=step)
    return 1


def interrupted(message: str) -> NoReturn:
    err.print(f"flower: {message}")
    leave(code=130, kind="interrupted", reason=message)
    raise typer.Exit(130) from None


def quitting() -> None:
    """We are leaving with 130: a further Ctrl-C must not interrupt the cleanup (closing the
    store, stopping the CLI) or turn the exit into a traceback."""
    with contextlib.suppress(ValueError, OSError):  # ValueError: not the main thread
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def new_runtime(**kw: Any) -> Runtime:
    """A Runtime, or one line and exit: 2 for a bad directory, 1 for a sessions.db SQLite
    cannot read (a malformed or foreign file; moving it aside starts a new store)."""
    try:
        return Runtime(**{"environ": G.environ, **kw})
    except ValueError as exc:
        fail(str(exc))
    except sqlite3.DatabaseError as exc:
        db = Path(kw.get("run_dir", "runs")).resolve() / SESSIONS_DB
        full = FullDisk(db.parent)
        if full.note(SESSIONS_DB, exc) or full.check_space(SESSIONS_DB):  # SQLite says "disk I/O error" then
            fail(full.reason(None), 1, "disk")
        fail(f"{db} cannot be opened: {exc} (move it aside to start a new session store)", 1, "database")


def make_runtime(**kw: Any) -> Runtime:
    return new_runtime(
        workspace=G.workspace,
        run_dir=G.run_dir,
        trim=kw.pop("trim", G.trim),
        workbench=G.workbench,
        limits=limits.current_limits(G.environ),
        **kw,
    )
