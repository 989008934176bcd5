"""GoPrinter: what `flower go` shows — step headers, questions and answers, goals, verdicts."""

from __future__ import annotations

from typing import Any

from flower.catalogue import ANSWER_LINES, QA_FILE, WORK
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
from flower.flows.starter import brief_path, goal_path
from flower.flows.wake import display_path, notice, step_header


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
                self.say(step_header(event.name, event.index, event.total, resumed=event.resumed, woke=event.woke))
            case Frozen():
                self.say(f"== {event.name}: 已定下, 跳过 ({display_path(event.path)})", style="dim")
                # (already settled: skipped — the file's content still goes to the next steps)
            case Asked():
                self._ask(event)
            case Answered():
                line = ANSWER_LINES.get(event.status)
                if line:
                    self.say(line, style="dim")
            case GoalSet():
                self.say(f"  目标: {event.statement}  ·  判定清单 {len(event.checks)} 条  ->  {display_path(event.path)}")
            case Judging():
                self.say(f"  -- {event.name}: 独立判定者 (全新会话) 对照 目标.md 检查", style="cyan")
                # (an independent judge, a fresh session, checks against 目标.md)
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
            wait = f"{t / 60:.0f} 分钟" if t >= 60 else f"{t:.0f} 秒"
            self.say(f"   回车提交;空行 = 不回答;{wait}内不答由 agent 自己决定")
            # (Enter submits; an empty line = no answer; unanswered after <wait>, the agent decides)

    def _verdict(self, event: Judged) -> None:
        state = event.state
        style = "green" if state == "achieved" else "yellow" if state == "not_yet" else "red"
        self.say(f"  {event.name}: {state}" + (f"  {event.reason}" if event.reason else ""), style=style)
        for item in event.missing or []:
            self.say(f"    - {item}")
        if event.note:
            self.say(f"    (结论不清楚, 按未达成算: {event.note})")  # (unclear verdict: counted as not achieved)
        if state == "not_yet" and (event.round or 0) < (event.rounds or 0):
            self.say(f"  -> 带着没通过的项回到同一个会话接着做 (第 {event.round + 1}/{event.rounds} 轮)")
            # (back to the same session with the failed checks: round N/M)

    def delivered(self, where: str, text: str) -> None:
        if where == "inbox":  # an answer or a refusal is shown by the channel's "answer" event
            self.say("  -> 放进收件箱 (agent 在阶段之间会读), 也记进了 需求.md 的「运行中补充」", style="dim")
            # (into the inbox — the agent reads it between phases — and into 需求.md)

    def outcome(self, ctx: dict[str, Any], wb: Workbench, *, clarify_only: bool, goal: bool) -> None:
        failed = ctx.get("_failed_at")
        verdict = ctx.get("_verdict")
        if failed:
            why = ctx.get("_aborted") or ""
            if not why and failed == WORK and verdict is not None and not verdict.achieved:
                why = "判定没通过, 轮数用完了"  # the judge did not pass it and the rounds ran out
            if not why:
                result = ctx.get("_results", {}).get(failed)
                why = (result.error or "") if result is not None else ""
            self.say(f"没做完: 停在「{failed}」" + (f" — {why}" if why else ""), style="red")
            self.say("  再运行 flower 接着做, 或 flower \"补充的话\" 加一句 (--rounds N 给更多轮)")
            # (run flower again to continue, or add words; --rounds N for more rounds)
        elif clarify_only:
            self.say("需求已确认 (--clarify-only: 到此为止)", style="green")
        elif goal and verdict is not None and verdict.achieved:
            self.say("做完了: 独立判定者确认目标已达成", style="green")  # done: the judge confirmed the goal
        else:
            self.say("做完了", style="green")
        notes = [("需求", brief_path(wb)), ("目标", goal_path(wb)), ("问答", wb.notes / QA_FILE)]
        self.say("  " + "  ·  ".join(f"{k} {display_path(v)}" for k, v in notes if v.exists()))
