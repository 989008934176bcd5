"""The `flower` command: `flower "task"` (go), `flower run TARGET`, `flower once "prompt"`.

Upstream's spellings are kept. Global options come before the subcommand; a first argument
that is not a subcommand means `go` (so `flower "do X"` and plain `flower` work).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import typer
from rich.console import Console

from . import signals
from .display import Display, is_scripted
from .loader import TargetError, load_workflow
from .runtime import Runtime
from .spec import AgentSpec
from .wake import notice, step_header, wake_line
from .workflow import WorkflowError

SUBCOMMANDS = ("go", "run", "once")
GLOBAL_WITH_VALUE = ("-w", "--workspace", "-r", "--run-dir")

app = typer.Typer(add_completion=False, no_args_is_help=False, rich_markup_mode=None)
err = Console(stderr=True, soft_wrap=True)


class Globals:
    workspace: Path = Path(".")
    run_dir: Path = Path("runs")
    verbose: bool = False
    workbench: bool = False
    trim: bool = False


G = Globals()


@app.callback()
def _globals(
    workspace: Path = typer.Option(Path("."), "-w", "--workspace", help="the project directory the agent works in"),
    run_dir: Path = typer.Option(Path("runs"), "-r", "--run-dir", help="where sessions.db, lineage.json and manifest.json live (relative to the current directory)"),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="show every tool call and message"),
    workbench: bool = typer.Option(False, "-W", "--workbench", help="give the agent a workbench (.flower/) for scripts, artifacts and notes"),
    trim: bool = typer.Option(False, "-T", "--trim", help="trim old large tool results on resume (content kept on disk)"),
) -> None:
    G.workspace, G.run_dir, G.verbose, G.workbench, G.trim = workspace, run_dir, verbose, workbench, trim


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[red]flower:[/red] {message}", highlight=False)
    raise typer.Exit(code)


def make_runtime(**kw: Any) -> Runtime:
    try:
        return Runtime(workspace=G.workspace, run_dir=G.run_dir, trim=kw.pop("trim", G.trim),
                       workbench=G.workbench, **kw)
    except ValueError as exc:
        _fail(str(exc))
        raise  # unreachable; keeps type checkers calm


@app.command()
def once(
    prompt: str = typer.Argument(..., help="what to ask"),
    tools: str = typer.Option("Read,Glob,Grep", "-t", "--tools", help="comma-separated tools the agent may use"),
    permission_mode: str = typer.Option("default", "-p", "--permission-mode", help="default | acceptEdits | plan | bypassPermissions | dontAsk"),
    budget: float | None = typer.Option(None, "-b", "--budget", help="stop the run past this many USD"),
    resume: str | None = typer.Option(None, "--resume", help="continue this session id"),
    fork: bool = typer.Option(False, "--fork", help="with --resume: branch into a new session"),
) -> None:
    """One question, one session: no Workflow, no lineage."""
    if fork and not resume:
        _fail("--fork needs --resume <session id>")
    spec = AgentSpec("once", allowed_tools=[t.strip() for t in tools.split(",") if t.strip()],
                     permission_mode=permission_mode, max_budget_usd=budget)
    rt = make_runtime()
    display = Display(verbose=G.verbose)
    try:
        result = anyio.run(lambda: rt.run(spec, prompt, resume=resume, fork=fork, on_event=display.event))
    finally:
        rt.close()
    display.final_text(result)
    display.summary(rt)
    raise typer.Exit(0 if result.ok else 1)


@app.command()
def run(
    target: str = typer.Argument(..., help="module:attr or path/to/file.py:attr naming a Workflow"),
    prompt: str | None = typer.Option(None, "--prompt", help="put this text in ctx['prompt'] for the workflow's steps"),
    values: list[str] = typer.Option([], "--set", help="KEY=VALUE into ctx['args'] (repeatable)"),
    fresh: bool = typer.Option(False, "--fresh", help="continuous=False: every step starts a new session"),
) -> None:
    """Run a Workflow defined in Python."""
    try:
        workflow = load_workflow(target)
    except TargetError as exc:
        _fail(str(exc))
        raise
    for item in values:
        if "=" not in item:
            _fail(f"--set {item!r}: expected KEY=VALUE")
    if values:
        workflow.context.setdefault("args", {}).update(dict(v.split("=", 1) for v in values))
    if prompt is not None:
        workflow.context["prompt"] = prompt
    if fresh:
        workflow.continuous = False
    rt = make_runtime()
    display = Display(verbose=G.verbose)
    if workflow.continuous:
        line = wake_line(G.workspace, run_dir=G.run_dir, steps_order=[s.name for s in workflow.steps])
        if line:
            display.console.print(line, markup=False)

    def on_event(kind: str, payload: dict) -> Any:
        if kind == "step":
            display.console.print(step_header(payload["name"], payload["index"], payload["total"],
                                              resumed=payload["resumed"], woke=payload["woke"]), markup=False)
            return None
        text = notice(kind, payload)
        if text:
            display.console.print(text, markup=False)
        return display.event(kind, payload)

    try:
        # One Ctrl-C interrupts and continues, two quit (130); SIGTERM/SIGHUP rescue the step.
        with signals.install(rt, ask=signals.ask_on_terminal()):
            ctx = anyio.run(lambda: workflow.run(rt, on_event=on_event, on_step=display.step_done))
    except WorkflowError as exc:
        _fail(str(exc))
        raise
    except KeyboardInterrupt:
        err.print("flower: interrupted (the session continues next time)")
        raise typer.Exit(130) from None
    finally:
        rt.close()
    display.summary(rt)
    raise typer.Exit(1 if ctx.get("_failed_at") else 0)


def route(argv: list[str]) -> list[str]:
    """Insert `go` when the first positional word is not a subcommand (upstream's default)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in GLOBAL_WITH_VALUE:
            i += 2
            continue
        if arg.startswith("-"):
            if arg in ("--help", "-h"):
                return argv
            i += 1
            continue
        return argv if arg in SUBCOMMANDS else argv[:i] + ["go"] + argv[i:]
    return argv + ["go"]


def main(argv: list[str] | None = None) -> None:
    args = route(list(sys.argv[1:] if argv is None else argv))
    try:
        app(args=args, prog_name="flower", standalone_mode=True)
    except KeyboardInterrupt:
        err.print("flower: interrupted")
        sys.exit(130)


__all__ = ["app", "main", "is_scripted"]
