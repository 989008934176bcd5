"""The `flower` command: `flower "task"` (go), `flower run TARGET`, `flower once "prompt"`.

Upstream's spellings are kept. Global options come before the subcommand; a first argument
that is not a subcommand means `go` (so `flower "do X"` and plain `flower` work).
"""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any, NoReturn

import anyio
import typer
from rich.console import Console
from rich.text import Text
from typer.exceptions import TyperException

from flower import exitinfo
from flower.cli import terminal
from flower.cli.display import Display, is_scripted
from flower.context.handoff import Handoff
from flower.context.workbench import Workbench
from flower.errors import FlowerError, TargetError, WorkflowError
from flower.flows.loader import load_workflow
from flower.flows.roles import require_git
from flower.flows.starter import (
    CLARIFY,
    GOAL,
    QA_FILE,
    WORK,
    brief_path,
    goal_path,
    in_progress,
    starter_flow,
)
from flower.flows.wake import display_path, notice, step_header, wake_line
from flower.runtime import signals
from flower.runtime.engine import Runtime
from flower.spec import AgentSpec

PERMISSION_MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto")
SUBCOMMANDS = ("go", "run", "once")
GLOBAL_WITH_VALUE = ("-w", "--workspace", "-r", "--run-dir")
GLOBAL_FLAGS = ("-v", "--verbose", "-W", "--workbench", "-T", "--trim")
HELP = ("-h", "--help")

app = typer.Typer(add_completion=False, no_args_is_help=False, rich_markup_mode=None,
                  context_settings={"help_option_names": list(HELP)})
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


def _fail(message: str, code: int = 2, kind: str = "usage") -> None:
    err.print(Text.assemble(("flower:", "red"), " ", message), highlight=False)
    exitinfo.leave(G.run_dir, code=code, kind=kind, reason=message)
    raise typer.Exit(code)


def _ended(ctx: dict) -> int:
    """The exit code of a workflow run, with its cause left in runs/.exit.json."""
    failure = exitinfo.step_failure(ctx)
    if failure is None:
        exitinfo.leave(G.run_dir, code=0, kind="done", reason="every step passed")
        return 0
    kind, reason, step = failure
    exitinfo.leave(G.run_dir, code=1, kind=kind, reason=reason, step=step)
    return 1


def _interrupted(message: str) -> NoReturn:
    err.print(f"flower: {message}")
    exitinfo.leave(G.run_dir, code=130, kind="interrupted", reason=message)
    raise typer.Exit(130) from None


def new_runtime(**kw: Any) -> Runtime:
    """A Runtime, or one line and exit: 2 for a bad directory, 1 for a sessions.db SQLite
    cannot read (a malformed or foreign file; moving it aside starts a new store)."""
    try:
        return Runtime(**kw)
    except ValueError as exc:
        _fail(str(exc))
    except sqlite3.DatabaseError as exc:
        db = Path(kw.get("run_dir", "runs")).resolve() / "sessions.db"
        _fail(f"{db} cannot be opened: {exc} (move it aside to start a new session store)", 1, "database")
    raise AssertionError("unreachable")


def make_runtime(**kw: Any) -> Runtime:
    return new_runtime(workspace=G.workspace, run_dir=G.run_dir, trim=kw.pop("trim", G.trim),
                       workbench=G.workbench, **kw)


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
    exitinfo.clear(G.run_dir)
    if fork and not resume:
        _fail("--fork needs --resume <session id>")
    if permission_mode not in PERMISSION_MODES:
        _fail(f"-p {permission_mode!r}: use one of {', '.join(PERMISSION_MODES)}")
    if budget is not None and budget <= 0:
        _fail(f"-b {budget}: a budget is a positive number of USD")
    spec = AgentSpec("once", allowed_tools=[t.strip() for t in tools.split(",") if t.strip()],
                     permission_mode=permission_mode, max_budget_usd=budget)
    rt = make_runtime()
    display = Display(verbose=G.verbose)
    try:
        # Same signals as `run`: one Ctrl-C interrupts and continues, SIGTERM/SIGHUP rescue the step.
        with signals.install(rt, ask=signals.ask_on_terminal()):
            result = anyio.run(lambda: rt.run(spec, prompt, resume=resume, fork=fork, on_event=display.event))
    except KeyboardInterrupt:
        _interrupted("interrupted")
    finally:
        rt.close()
    display.final_text(result)
    display.summary(rt)
    raise typer.Exit(_ended({"_failed_at": None if result.ok else result.step, "_results": {result.step: result}}))


@app.command()
def run(
    target: str = typer.Argument(..., help="module:attr or path/to/file.py:attr naming a Workflow"),
    prompt: str | None = typer.Option(None, "--prompt", help="put this text in ctx['prompt'] for the workflow's steps"),
    values: list[str] = typer.Option([], "--set", help="KEY=VALUE into ctx['args'] (repeatable)"),
    fresh: bool = typer.Option(False, "--fresh", help="continuous=False: every step starts a new session"),
) -> None:
    """Run a Workflow defined in Python."""
    exitinfo.clear(G.run_dir)
    try:
        workflow = load_workflow(target)
    except TargetError as exc:
        _fail(str(exc), kind="target")
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
        _fail(str(exc), kind="workflow")
        raise
    except KeyboardInterrupt:
        _interrupted("interrupted (the session continues next time)")
        raise
    finally:
        rt.close()
    display.summary(rt)
    raise typer.Exit(_ended(ctx))


@app.command()
def go(
    words: list[str] | None = typer.Argument(None, help="the task; in a directory already in progress: words to add (none = just continue)", show_default=False),
    asks: int = typer.Option(-1, "--asks", help="questions the agents may ask you in this run (-1 = unlimited)"),
    rounds: int = typer.Option(3, "--rounds", help="work rounds, each judged against 目标.md (resets every wake)"),
    no_goal: bool = typer.Option(False, "--no-goal", help="no 设定目标 step and no judge: clarify, then work"),
    judge_can_run: bool = typer.Option(False, "--judge-can-run", help="the judge may run commands (Bash) to verify"),
    timeout: float = typer.Option(1800.0, "--timeout", help="seconds a question waits for your answer; 0 = fully automatic (nobody answers, no prompts)"),
    isolate: bool = typer.Option(False, "--isolate", help="each worker changes its own git worktree (needs a git repository)"),
    window: int | None = typer.Option(None, "--window", help="the model's context window in tokens, for the handoff threshold (default 200000)"),
    no_handoff: bool = typer.Option(False, "--no-handoff", help="never hand over to a fresh session when the context fills up"),
    new: bool = typer.Option(False, "--new", help="archive 需求.md, 目标.md and lineage.json, then start something new"),
    clarify_only: bool = typer.Option(False, "--clarify-only", help="only write 需求.md, then stop"),
    no_trim: bool = typer.Option(False, "--no-trim", help="keep old large tool results in the context on resume"),
) -> None:
    """确认需求 -> 设定目标 -> 干活, judged against 目标.md (the default command).

    In a directory already in progress, `flower` continues, `flower "words"` adds words
    (appended to 需求.md, 目标.md re-derived), `flower --new "task"` starts over.
    """
    ws = G.workspace
    exitinfo.clear(G.run_dir)
    if not ws.is_dir():
        _fail(f"workspace {ws.resolve()} is not a directory: create it or pass -w DIR")
    if rounds < 1:
        _fail(f"--rounds {rounds}: needs at least 1 round")
    if asks < -1:
        _fail(f"--asks {asks}: use a number >= 0, or -1 for unlimited")
    if window is not None and window <= 0:
        _fail(f"--window {window}: give the context window in tokens, e.g. --window 200000")
    if isolate:
        try:
            require_git(ws)
        except ValueError as exc:
            _fail(str(exc).replace("isolate=True", "--isolate"))
    person = terminal.interactive() and timeout > 0  # someone may be asked; else fully automatic
    wb = Workbench(ws)
    try:
        text, new = _what_to_do(ws, wb, " ".join(words or []).strip(), new=new, person=person)
    except KeyboardInterrupt:
        quitting()
        err.print("\nflower: quit")
        raise typer.Exit(130) from None
    try:
        wf = starter_flow(text, workspace=ws, run_dir=G.run_dir, new=new, isolate=isolate,
                          clarify_only=clarify_only, goal=not no_goal, rounds=rounds,
                          judge_can_run=judge_can_run, max_asks=asks, timeout_s=timeout,
                          ask_fn=False, workbench=wb)
    except ValueError as exc:
        _fail(str(exc))
        raise
    handoff: Any = False if no_handoff else (Handoff(window=window) if window else True)
    rt = new_runtime(workspace=ws, run_dir=G.run_dir, trim=not no_trim, workbench=wf.workbench, handoff=handoff)
    display = Display(verbose=G.verbose)
    printer = GoPrinter(display, person=person)
    wf.channel.on_event = printer.event
    typed = terminal.TypedLines(wf.channel, on_delivered=printer.delivered).start()
    try:
        with signals.install(rt, ask=typed.next_line if person else None):
            ctx = anyio.run(lambda: wf.run(rt, on_event=printer.event, on_step=display.step_done))
    except WorkflowError as exc:
        _fail(str(exc), kind="workflow")
        raise
    except KeyboardInterrupt:
        quitting()
        _interrupted("interrupted (run flower here again to continue)")
        raise
    finally:
        rt.close()
    display.summary(rt)
    printer.outcome(ctx, wb, clarify_only=clarify_only, goal=not no_goal)
    raise typer.Exit(_ended(ctx))


def _what_to_do(ws: Path, wb: Workbench, text: str, *, new: bool, person: bool) -> tuple[str, bool]:
    """(task or wake words, new). Reports the wake; asks at the terminal when a person is there
    and nothing was said: Enter = continue, words = add, /new = start over, Ctrl-C = quit."""
    waking = not new and in_progress(ws, run_dir=G.run_dir, workbench=wb)
    if waking:
        line = wake_line(ws, run_dir=G.run_dir, steps_order=[CLARIFY, GOAL, WORK])
        if line:
            err.print(line, markup=False, highlight=False)
        if not text and person:
            got = terminal.ask_line(terminal.WAKE_PROMPT)
            if got is None:
                err.print("flower: no input; nothing done")
                raise typer.Exit(0)
            if got == terminal.NEW:
                new, waking = True, False
            else:
                text = got
    if not waking and not text:
        if not person:
            _fail(f"nothing to continue in {display_path(ws)}: give a task, e.g. flower \"make hello.txt say hi\"")
        got = terminal.ask_line(terminal.TASK_PROMPT)
        if not got or got == terminal.NEW:
            err.print("flower: no task; nothing done")
            raise typer.Exit(0)
        text = got
    return text, new


def quitting() -> None:
    """We are leaving with 130: a further Ctrl-C must not interrupt the cleanup (closing the
    store, stopping the CLI) or turn the exit into a traceback."""
    with contextlib.suppress(ValueError, OSError):  # ValueError: not the main thread
        signal.signal(signal.SIGINT, signal.SIG_IGN)


class GoPrinter:
    """What `flower go` shows: step headers, questions and answers, goals, verdicts, warnings."""

    def __init__(self, display: Display, *, person: bool) -> None:
        self.display = display
        self.console = display.console
        self.person = person

    def say(self, text: str, style: str | None = None) -> None:
        self.console.print(text, markup=False, highlight=False, style=style)

    def event(self, kind: str, payload: dict) -> Any:
        if kind == "step":
            self.say(step_header(payload["name"], payload["index"], payload["total"],
                                 resumed=payload["resumed"], woke=payload["woke"]))
            return None
        shown = {"ask": self._ask, "answer": self._answer, "goal": self._goal, "judge": self._judge,
                 "verdict": self._verdict, "warn": self._warn, "frozen": self._frozen}.get(kind)
        if shown is not None:
            shown(payload)
            return None
        line = notice(kind, payload)
        if line:
            self.say(line)
        return self.display.event(kind, payload)

    def _frozen(self, p: dict) -> None:
        self.say(f"== {p['name']}: 已定下, 跳过 ({display_path(p['path'])})", style="dim")
        # (already settled: skipped — the file's content still goes to the next steps)

    def _ask(self, p: dict) -> None:
        self.say(f"❓ {p['question']}", style="bold")
        if self.person and p.get("timeout_s", 0) > 0:
            t = p["timeout_s"]
            wait = f"{t / 60:.0f} 分钟" if t >= 60 else f"{t:.0f} 秒"
            self.say(f"   回车提交;空行 = 不回答;{wait}内不答由 agent 自己决定")
            # (Enter submits; an empty line = no answer; unanswered after <wait>, the agent decides)

    def _answer(self, p: dict) -> None:
        lines = {
            "answered": "   ✓ 收到回答",  # answer received
            "auto": "   (全自动: 没人回答, agent 自己决定并记下假设)",  # fully automatic: the agent decides
            "timeout": "   (没等到回答: agent 自己决定并记下假设)",  # no answer in time
            "declined": "   (不回答: agent 自己决定)",  # declined
            "budget": "   (提问次数用完, 没有转给你)",  # question budget spent
        }
        line = lines.get(p.get("status", ""))
        if line:
            self.say(line, style="dim")

    def _goal(self, p: dict) -> None:
        self.say(f"  目标: {p['statement']}  ·  判定清单 {len(p['checks'])} 条  ->  {display_path(p['path'])}")

    def _judge(self, p: dict) -> None:
        self.say(f"  -- {p['name']}: 独立判定者 (全新会话) 对照 目标.md 检查", style="cyan")
        # (an independent judge, a fresh session, checks against 目标.md)

    def _verdict(self, p: dict) -> None:
        state = p["state"]
        style = "green" if state == "achieved" else "yellow" if state == "not_yet" else "red"
        self.say(f"  {p['name']}: {state}" + (f"  {p['reason']}" if p.get("reason") else ""), style=style)
        for item in p.get("missing") or []:
            self.say(f"    - {item}")
        if p.get("note"):
            self.say(f"    (结论不清楚, 按未达成算: {p['note']})")  # (unclear verdict: counted as not achieved)
        if state == "not_yet" and p.get("round", 0) < p.get("rounds", 0):
            self.say(f"  -> 带着没通过的项回到同一个会话接着做 (第 {p['round'] + 1}/{p['rounds']} 轮)")
            # (back to the same session with the failed checks: round N/M)

    def _warn(self, p: dict) -> None:
        self.say(f"  ! {p['message']}", style="yellow")

    def delivered(self, where: str, text: str) -> None:
        if where == "inbox":  # an answer or a refusal is shown by the channel's "answer" event
            self.say("  -> 放进收件箱 (agent 在阶段之间会读), 也记进了 需求.md 的「运行中补充」", style="dim")
            # (into the inbox — the agent reads it between phases — and into 需求.md)

    def outcome(self, ctx: dict, wb: Workbench, *, clarify_only: bool, goal: bool) -> None:
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


def route(argv: list[str]) -> list[str]:
    """Global options first (wherever they were typed: `flower run flows.py:main -w DIR`), then
    `go` unless a subcommand or help was asked for (upstream's default): `flower "do X"`,
    `flower --new "X"`, `flower --timeout 0` and plain `flower` all mean go."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest += argv[i:]
            break
        if arg in GLOBAL_WITH_VALUE:
            front += argv[i:i + 2]
            i += 2
            continue
        if arg in GLOBAL_FLAGS or arg.startswith(("--workspace=", "--run-dir=")):
            front.append(arg)
        else:
            rest.append(arg)
        i += 1
    if rest and (rest[0] in SUBCOMMANDS or rest[0] in HELP):
        return front + rest
    return front + ["go"] + rest


def main(argv: list[str] | None = None) -> None:
    """Exit codes: 0 done, 1 a step failed, 2 bad usage, 130 interrupted. Errors are one line."""
    args = route(list(sys.argv[1:] if argv is None else argv))
    try:
        code = app(args=args, prog_name="flower", standalone_mode=False)
    except TyperException as exc:  # usage errors (exit 2): one line, not a box
        message = " ".join(exc.format_message().split())
        ctx = getattr(exc, "ctx", None)
        hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
        err.print(f"flower: {message}{hint}", markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except FlowerError as exc:  # an error the person can fix, not caught by a command: one line
        err.print(Text.assemble(("flower:", "red"), " ", str(exc)), highlight=False)
        exitinfo.leave(G.run_dir, code=2, kind=exc.kind, reason=str(exc))
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        err.print("flower: interrupted")
        exitinfo.leave(G.run_dir, code=130, kind="interrupted", reason="interrupted")
        sys.exit(130)
    except Exception as exc:  # a bug or an unforeseen error: keep the traceback, leave the cause
        exitinfo.leave(G.run_dir, code=1, kind="crash", reason=f"{type(exc).__name__}: {exc}")
        raise
    sys.exit(code if isinstance(code, int) else 0)


__all__ = ["app", "main", "is_scripted"]
