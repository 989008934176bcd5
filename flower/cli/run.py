"""`flower run TARGET`: run a Workflow defined in Python (module:attr or file.py:attr)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import typer

from flower import exitinfo
from flower.cli.common import G, WindowOption, ended, fail, interrupted, make_runtime, window_or_env
from flower.cli.display import Display
from flower.cli.shared import shared_options
from flower.context.handoff import Handoff
from flower.events import StepStarted, parse
from flower.flows.loader import load_workflow
from flower.runtime import signals
from flower.starter.wake import notice, step_header, wake_line


@shared_options()
def run(
    target: str = typer.Argument(..., help="module:attr or path/to/file.py:attr naming a Workflow"),
    prompt: str | None = typer.Option(
        None, "--prompt", help="put this text in ctx['prompt'] for the workflow's steps"
    ),
    values: list[str] = typer.Option([], "--set", help="KEY=VALUE into ctx['args'] (repeatable)"),
    fresh: bool = typer.Option(False, "--fresh", help="continuous=False: every step starts a new session"),
    window: WindowOption = None,
) -> None:
    """Run a Workflow defined in Python."""
    exitinfo.clear(G.run_dir)
    window = window_or_env(window)
    workflow = load_workflow(target)  # a TargetError is one line (flower.cli.app.main)
    for item in values:
        if "=" not in item:
            fail(f"--set {item!r}: expected KEY=VALUE")
    if values:
        workflow.context.setdefault("args", {}).update(dict(v.split("=", 1) for v in values))
    if prompt is not None:
        workflow.context["prompt"] = prompt
    if fresh:
        workflow.continuous = False
    rt = make_runtime(**({"handoff": Handoff(window=window)} if window else {}))
    display = Display(verbose=G.verbose)
    if workflow.continuous:
        line = wake_line(G.workspace, run_dir=G.run_dir, steps_order=[s.name for s in workflow.steps])
        if line:
            display.console.print(line, markup=False)
    on_event = _step_printer(display)
    try:
        # One Ctrl-C interrupts and continues, two quit (130); SIGTERM/SIGHUP rescue the step.
        with signals.install(rt, ask=signals.ask_on_terminal()):
            ctx = anyio.run(lambda: workflow.run(rt, on_event=on_event, on_step=display.step_done))
    except KeyboardInterrupt:
        interrupted("interrupted (the session continues next time)")
        raise
    finally:
        rt.close()
    display.summary(rt)
    raise typer.Exit(ended(ctx))


def _step_printer(display: Display) -> Callable[[str, dict[str, Any]], Any]:
    """The run's events on the terminal: each step's header, the notices, then the display's."""

    def on_event(kind: str, payload: dict[str, Any]) -> Any:
        event = parse(kind, payload)
        if isinstance(event, StepStarted):
            display.console.print(
                step_header(event.name, event.index, event.total, resumed=event.resumed, woke=event.woke),
                markup=False,
            )
            return None
        text = notice(event)
        if text:
            display.console.print(text, markup=False)
        display.show(event)
        return None

    return on_event
