"""What a person sees while flower works: step headers, tool calls, results, totals (rich)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flower.catalogue.terminal import WOKE_MARK, step_label
from flower.events import (
    AssistantText,
    Event,
    Interrupted,
    Retried,
    SessionKnown,
    StepStarted,
    ToolCalled,
    parse,
)
from flower.result import StepResult

SCRIPTED_LABEL = "offline scripted model — no real model was called"


def is_scripted(model: str) -> bool:
    return model.startswith("scripted")


class Display:
    def __init__(self, verbose: bool = False, console: Console | None = None) -> None:
        self.verbose = verbose
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True)
        self.out = Console(highlight=False, soft_wrap=True)

    def event(self, kind: str, payload: dict[str, Any]) -> None:
        """An `on_event` hook: the event, typed, to `show`."""
        self.show(parse(kind, payload))

    def show(self, event: Event | None) -> None:
        c = self.console
        match event:
            case StepStarted(name=name, index=index, total=total, resumed=resumed, woke=woke):
                again = WOKE_MARK.format(woke=woke) if resumed else ""
                c.rule(f"{escape(step_label(str(name)))}  {index}/{total}{again}", align="left")
            case ToolCalled(name=name, input=tool_input):
                c.print(f"  [dim]· {escape(str(name))}[/dim] {_short(tool_input)}")
            case AssistantText(text=text) if self.verbose:
                c.print(f"  [dim]{_short(text, 200)}[/dim]")
            case Retried(error_kind=error_kind, error=error):
                c.print(
                    f"  [yellow]retry after {escape(str(error_kind))} error:[/yellow] {_short(error, 160)}"
                )
            case SessionKnown(session_id=session_id) if self.verbose:
                c.print(f"  [dim]session {escape(str(session_id))}[/dim]")
            case Interrupted(message=message):
                c.print(f"  [yellow]interrupted; continuing with:[/yellow] {_short(message)}")

    def step_done(self, name: str, result: StepResult) -> None:
        mark = "[green]ok[/green]" if result.ok else f"[red]failed[/red] {_short(result.error, 160)}"
        self.console.print(
            f"  {escape(step_label(name))}: {mark}  ${result.cost_usd:.4f}  {result.num_turns} turns  {result.duration_s:.1f}s"
        )

    def final_text(self, result: StepResult) -> None:
        if result.text:
            self.out.print(result.text, markup=False)
        if not result.ok:
            self.console.print(f"[red]failed:[/red] {escape(str(result.error))}")

    def summary(self, runtime: Any) -> None:
        results: list[StepResult] = runtime.results
        if len(results) > 1:
            table = Table(title="steps", show_lines=False)
            for col in ("step", "ok", "cost $", "turns", "seconds", "session"):
                table.add_column(col)
            for r in results:
                table.add_row(
                    escape(step_label(r.step)),
                    "yes" if r.ok else "no",
                    f"{r.cost_usd:.4f}",
                    str(r.num_turns),
                    f"{r.duration_s:.1f}",
                    r.session_id[:8],
                )
            self.console.print(table)
        models = {r.model for r in results if r.model}
        if any(is_scripted(m) for m in models):
            self.console.print(f"[magenta]model: {SCRIPTED_LABEL}[/magenta]")
        self.console.print(
            f"total cost ${runtime.total_cost():.4f}  manifest {escape(str(runtime.manifest_path))}"
        )


def _short(value: Any, limit: int = 100) -> str:
    """One line of someone else's text (model, tool input, error), shortened and escaped so
    brackets in it are never read as rich markup."""
    text = str(value if value is not None else "").replace("\n", " ")
    return escape(text if len(text) <= limit else text[: limit - 1] + "…")
