"""`flower "task"` / `flower go`: 确认需求 -> 设定目标 -> 干活, the default command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import typer

from flower import exitinfo
from flower.catalogue.names import CLARIFY, GOAL, WORK
from flower.catalogue.terminal import (
    GO_ASKS_HELP,
    GO_CLARIFY_ONLY_HELP,
    GO_ISOLATE_HELP,
    GO_JUDGE_CAN_RUN_HELP,
    GO_NEW_HELP,
    GO_NO_GOAL_HELP,
    GO_NO_HANDOFF_HELP,
    GO_NO_TRIM_HELP,
    GO_ROUNDS_HELP,
    GO_TIMEOUT_HELP,
    GO_WORDS_HELP,
    TASK_PROMPT,
    WAKE_QUESTION,
)
from flower.cli import terminal
from flower.cli.common import (
    G,
    WindowOption,
    ended,
    err,
    fail,
    interrupted,
    new_runtime,
    quitting,
    window_or_env,
)
from flower.cli.display import Display
from flower.cli.go_printer import GoPrinter
from flower.cli.limits import current_limits
from flower.cli.shared import shared_options
from flower.context.handoff import Handoff
from flower.context.workbench import Workbench
from flower.flows.workflow import Workflow
from flower.runtime import signals
from flower.runtime.engine import Runtime
from flower.starter.flow import in_progress, starter_flow
from flower.starter.roles import require_git
from flower.starter.wake import display_path, wake_line


@shared_options()
def go(
    words: list[str] | None = typer.Argument(None, help=GO_WORDS_HELP, show_default=False),
    asks: int = typer.Option(-1, "--asks", help=GO_ASKS_HELP),
    rounds: int = typer.Option(3, "--rounds", help=GO_ROUNDS_HELP),
    no_goal: bool = typer.Option(False, "--no-goal", help=GO_NO_GOAL_HELP),
    judge_can_run: bool = typer.Option(False, "--judge-can-run", help=GO_JUDGE_CAN_RUN_HELP),
    timeout: float = typer.Option(1800.0, "--timeout", help=GO_TIMEOUT_HELP),
    isolate: bool = typer.Option(False, "--isolate", help=GO_ISOLATE_HELP),
    window: WindowOption = None,
    no_handoff: bool = typer.Option(False, "--no-handoff", help=GO_NO_HANDOFF_HELP),
    new: bool = typer.Option(False, "--new", help=GO_NEW_HELP),
    clarify_only: bool = typer.Option(False, "--clarify-only", help=GO_CLARIFY_ONLY_HELP),
    no_trim: bool = typer.Option(False, "--no-trim", help=GO_NO_TRIM_HELP),
) -> None:
    """确认需求 -> 设定目标 -> 干活, judged against 目标.md (the default command).

    In a directory already in progress, `flower` continues, `flower "words"` adds words
    (appended to 需求.md, 目标.md re-derived), `flower --new "task"` starts over.
    """
    ws = G.workspace
    exitinfo.clear(G.run_dir)
    window = _checked(ws, rounds=rounds, asks=asks, window=window, isolate=isolate)
    person = terminal.interactive() and timeout > 0  # someone may be asked; else fully automatic
    wb = Workbench(ws)
    try:
        text, new = _what_to_do(ws, wb, " ".join(words or []).strip(), new=new, person=person)
    except KeyboardInterrupt:
        quitting()
        err.print("\nflower: quit")
        raise typer.Exit(130) from None
    try:
        wf = starter_flow(
            text,
            workspace=ws,
            run_dir=G.run_dir,
            new=new,
            isolate=isolate,
            clarify_only=clarify_only,
            goal=not no_goal,
            rounds=rounds,
            judge_can_run=judge_can_run,
            max_asks=asks,
            timeout_s=timeout,
            ask_fn=False,
            workbench=wb,
        )
    except ValueError as exc:
        fail(str(exc))
        raise
    rt = _runtime(wf, window=window, handoff=not no_handoff, trim=not no_trim)
    ctx, display, printer = _run_flow(wf, rt, person)
    display.summary(rt)
    printer.outcome(ctx, wb, clarify_only=clarify_only, goal=not no_goal)
    raise typer.Exit(ended(ctx))


def _checked(ws: Path, *, rounds: int, asks: int, window: int | None, isolate: bool) -> int | None:
    """go's options checked, each bad one a one-line usage error; the context window to use."""
    if not ws.is_dir():
        fail(f"workspace {ws.resolve()} is not a directory: create it or pass -w DIR")
    if rounds < 1:
        fail(f"--rounds {rounds}: needs at least 1 round")
    if asks < -1:
        fail(f"--asks {asks}: use a number >= 0, or -1 for unlimited")
    window = window_or_env(window)
    if isolate:
        try:
            require_git(ws)
        except ValueError as exc:
            fail(str(exc).replace("isolate=True", "--isolate"))
    return window


def _runtime(wf: Workflow, *, window: int | None, handoff: bool, trim: bool) -> Runtime:
    """The Runtime the starter flow runs on: its workbench, the handoff at `window`, the limits."""
    return new_runtime(
        workspace=G.workspace,
        run_dir=G.run_dir,
        trim=trim,
        workbench=wf.workbench,
        handoff=(Handoff(window=window) if window else True) if handoff else False,
        limits=current_limits(G.environ),
    )


def _run_flow(wf: Workflow, rt: Runtime, person: bool) -> tuple[dict[str, Any], Display, GoPrinter]:
    """The starter flow run to its end, what happens printed, the person's typed lines taken."""
    display = Display(verbose=G.verbose)
    printer = GoPrinter(display, person=person)
    channel = wf.channel
    assert channel is not None, "starter_flow always gives the person a channel"
    channel.on_event = printer.event
    typed = terminal.TypedLines(channel, on_delivered=printer.delivered).start()
    try:
        with signals.install(rt, ask=typed.next_line if person else None):
            ctx = anyio.run(lambda: wf.run(rt, on_event=printer.event, on_step=display.step_done))
    except KeyboardInterrupt:
        quitting()
        interrupted("interrupted (run flower here again to continue)")
        raise
    finally:
        rt.close()
    return ctx, display, printer


def _what_to_do(ws: Path, wb: Workbench, text: str, *, new: bool, person: bool) -> tuple[str, bool]:
    """(task or wake words, new). Reports the wake; asks at the terminal when a person is there
    and nothing was said: Enter = continue, words = add, /new = start over, Ctrl-C = quit."""
    waking = not new and in_progress(ws, run_dir=G.run_dir, workbench=wb)
    if waking:
        line = wake_line(ws, run_dir=G.run_dir, steps_order=[CLARIFY, GOAL, WORK])
        if line:
            err.print(line, markup=False, highlight=False)
        if not text and person:
            got = terminal.ask_line(WAKE_QUESTION)
            if got is None:
                err.print("flower: no input; nothing done")
                raise typer.Exit(0)
            if got == terminal.NEW:
                new, waking = True, False
            else:
                text = got
    if not waking and not text:
        if not person:
            fail(
                f'nothing to continue in {display_path(ws)}: give a task, e.g. flower "make hello.txt say hi"'
            )
        got = terminal.ask_line(TASK_PROMPT)
        if not got or got == terminal.NEW:
            err.print("flower: no task; nothing done")
            raise typer.Exit(0)
        text = got
    return text, new
