"""GoPrinter: what `flower go` shows — step headers, questions and answers, goals, verdicts."""

from __future__ import annotations

from typing import Any

from flower.catalogue.names import QA_FILE, WORK
from flower.catalogue.terminal import (
    ANSWER_LINES,
    ASK_HINT,
    CLARIFIED_ONLY,
    DONE,
    DONE_JUDGED,
    FROZEN_LINE,
    GOAL_LINE,
    HOW_TO_CONTINUE,
    INBOX_DELIVERED,
    JUDGE_LINE,
    NEXT_ROUND,
    NOTE_LABELS,
    ROUNDS_SPENT,
    STOPPED_AT,
    UNCLEAR_VERDICT,
    WAIT_MINUTES,
    WAIT_SECONDS,
    step_label,
)
from flower.cli.display import Display
from flower.context.workbench import Workbench
from flower.events import (
    Answered,
    Asked,
    Event,
    Frozen,
    GoalSet,
    Judged,
    Judging,
    StepStarted,
    Warned,
    parse,
)
from flower.starter.flow import brief_path, goal_path
from flower.starter.wake import display_path, notice, step_header


class GoPrinter:
    """What `flower go` shows: step headers, questions and answers, goals, verdicts, warnings."""

    def __init__(self, display: Display, *, person: bool) -> None:
        self.display = display
        self.console = display.console
        self.person = person

    def say(self, text: str, style: str | None = None) -> None:
        self.console.print(text, markup=False, highlight=False, style=style)

    def event(self, kind: str, payload: dict[str, Any]) -> Any:
        """An `on_event` hook (the runtime's, the workflow's and the channel's): the event, typed."""
        self.show(parse(kind, payload))
        return None

    def show(self, event: Event | None) -> None:
        match event:
            case StepStarted():
                self.say(
                    step_header(
                        step_label(event.name),
                        event.index,
                        event.total,
                        resumed=event.resumed,
                        woke=event.woke,
                    )
                )
            case Frozen():
                self.say(
                    FROZEN_LINE.format(name=step_label(event.name), path=display_path(event.path)),
                    style="dim",
                )
            case Asked():
                self._ask(event)
            case Answered():
                line = ANSWER_LINES.get(event.status)
                if line:
                    self.say(line, style="dim")
            case GoalSet():
                self.say(
                    GOAL_LINE.format(
                        statement=event.statement, count=len(event.checks), path=display_path(event.path)
                    )
                )
            case Judging():
                self.say(JUDGE_LINE.format(name=step_label(event.name)), style="cyan")
            case Judged():
                self._verdict(event)
            case Warned():
                self.say(f"  ! {event.message}", style="yellow")
            case _:
                line = notice(event)
                if line:
                    self.say(line)
                self.display.show(event)

    def _ask(self, event: Asked) -> None:
        self.say(f"❓ {event.question}", style="bold")
        if self.person and event.timeout_s > 0:
            t = event.timeout_s
            wait = WAIT_MINUTES.format(n=t / 60) if t >= 60 else WAIT_SECONDS.format(n=t)
            self.say(ASK_HINT.format(wait=wait))

    def _verdict(self, event: Judged) -> None:
        state = event.state
        style = "green" if state == "achieved" else "yellow" if state == "not_yet" else "red"
        self.say(
            f"  {step_label(event.name)}: {state}" + (f"  {event.reason}" if event.reason else ""),
            style=style,
        )
        for item in event.missing or []:
            self.say(f"    - {item}")
        if event.note:
            self.say(UNCLEAR_VERDICT.format(note=event.note))
        if state == "not_yet" and (event.round or 0) < (event.rounds or 0):
            self.say(NEXT_ROUND.format(round=event.round + 1, rounds=event.rounds))

    def delivered(self, where: str, text: str) -> None:
        if where == "inbox":  # an answer or a refusal is shown by the channel's "answer" event
            self.say(INBOX_DELIVERED, style="dim")

    def outcome(self, ctx: dict[str, Any], wb: Workbench, *, clarify_only: bool, goal: bool) -> None:
        failed = ctx.get("_failed_at")
        verdict = ctx.get("_verdict")
        if failed:
            why = ctx.get("_aborted") or ""
            if not why and failed == WORK and verdict is not None and not verdict.achieved:
                why = ROUNDS_SPENT
            if not why:
                result = ctx.get("_results", {}).get(failed)
                why = (result.error or "") if result is not None else ""
            self.say(STOPPED_AT.format(step=step_label(failed)) + (f" — {why}" if why else ""), style="red")
            self.say(HOW_TO_CONTINUE)
        elif clarify_only:
            self.say(CLARIFIED_ONLY, style="green")
        elif goal and verdict is not None and verdict.achieved:
            self.say(DONE_JUDGED, style="green")
        else:
            self.say(DONE, style="green")
        notes = list(zip(NOTE_LABELS, (brief_path(wb), goal_path(wb), wb.notes / QA_FILE), strict=True))
        self.say("  " + "  ·  ".join(f"{k} {display_path(v)}" for k, v in notes if v.exists()))
