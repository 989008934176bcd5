"""Ready-made flows: clarify_step, goal_step, with_goal and starter_flow.

The starter flow is what `flower "do X"` runs::

    确认需求  (clarify: 需求.md's four sections; frozen once complete)
    设定目标  (目标.md: a statement + a checklist; frozen once complete, re-derived on wake words)
    干活      (a coordinator dispatching to a worker; an independent judge checks 目标.md after
               every round: `干活·判定#1`, and a not_yet resumes the same session: `干活#round2`)

Each piece is an ordinary Step built from Step's own mechanisms: `when` skips a
frozen step and still puts its content into ctx, `gate` parses and writes the file once per
attempt, `reduce` sends the parsed sections downstream (never the raw reply), `on_reject`
resumes the rejected session with what is missing.

Model-facing texts are Chinese like upstream's; the English meaning is in a comment next to each.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from flower.catalogue.names import (
    ARCHIVE_DIR,
    BRIEF_FILE,
    CLARIFY,
    COORDINATOR,
    GOAL,
    GOAL_FILE,
    JUDGE_SUFFIX,
    LINEAGE_FILE,
    QA_FILE,
    WORK,
)
from flower.catalogue.starter import (
    ACCEPT_WORDS,
    ACCEPTED_AS_DONE,
    ALL_SECTIONS,
    ANSWER_SEPARATORS,
    BRIEF_INCOMPLETE,
    CHANGED_MARK,
    CHECKS_HEADING,
    CLARIFY_PROMPT,
    CLARIFY_REPAIR,
    CLARIFY_RESUME,
    CODER_DESCRIPTION,
    CODER_PROMPT,
    GOAL_CHANGED,
    GOAL_HEADING,
    GOAL_PROMPT,
    GOAL_REPAIR,
    GOAL_RULES,
    GOAL_UNRECOGNISED,
    JUDGE_NO_REASON,
    JUDGE_PROMPT,
    JUDGE_UNFINISHED,
    LIST_SEPARATOR,
    NO_GOAL_TO_JUDGE,
    OVERRULE_WORDS,
    OVERRULED,
    PERSON_ADDED,
    UNREACHABLE_QUESTION,
    UNREACHABLE_UNANSWERED,
    WAKE_PROMPT,
    WORK_GOAL,
    WORK_INSTRUCTIONS,
    WORK_PROMPT,
    WORK_RESUME,
)
from flower.context.workbench import Workbench
from flower.errors import ConfigError, StepAbort, WorkspaceError
from flower.events import Event, Frozen, GoalSet, Judged, Judging, Warned
from flower.fileio import write_atomic
from flower.flows.workflow import Step, Workflow
from flower.spec import AgentSpec
from flower.starter.brief import append_wake_words, parse_brief, read_brief, write_brief
from flower.starter.channel import HumanChannel
from flower.starter.goal import Goal, Verdict, parse_goal, parse_verdict, render_goal
from flower.starter.roles import (
    READ_TOOLS,
    allow_only,
    clarify,
    coordinator,
    guard_hooks,
    judge,
    require_git,
    worker,
)
from flower.starter.wake import start_over, wake_state


def _emit(ctx: dict[str, Any], event: Event) -> Any:
    """Send an event to the run's display (ctx["_on_event"]); a broken display never breaks a step."""
    hook = ctx.get("_on_event")
    if hook is None:
        return None
    try:
        return hook(event.kind, event.payload())
    except Exception:  # noqa: BLE001
        return None


async def _emit_async(ctx: dict[str, Any], event: Event) -> None:
    out = _emit(ctx, event)
    if inspect.isawaitable(out):
        try:
            await out
        except Exception:  # noqa: BLE001
            pass


# -- 确认需求 --------------------------------------------------------------------------------------


# long: a step builder: the nested closures it returns are the step
def clarify_step(
    channel: HumanChannel | None,
    *,
    brief_path: str | os.PathLike[str],
    prompt: str | Callable[[dict[str, Any]], str],
    name: str = CLARIFY,
    spec: AgentSpec | None = None,
    model: str | None = None,
    max_turns: int | None = None,
    max_budget_usd: float | None = None,
    repair_rounds: int = 1,
    extra_resume: str = "",
) -> Step:
    """The step that turns a request into 需求.md.

    * `when`: a 需求.md with all four sections is frozen — the step is skipped, and its content
      still goes into ``ctx[name]`` and ``ctx["_brief"]``.
    * `gate`: parses the reply (fenced code stripped, aliases accepted), writes 需求.md (words the
      person added before are kept), passes when all four sections are filled. An incomplete
      brief gets `repair_rounds` rounds in the same session naming what is missing; after the
      last one it is accepted as it is, with a warning — it is then not frozen, so the next run
      clarifies again.
    * `reduce`: the parsed brief as text, never the raw reply.
    * `resume_prompt`: CLARIFY_RESUME (+ `extra_resume`) when a previous process's clarification
      is continued.
    """
    path = Path(brief_path)
    role = spec or clarify(
        channel, name=name, model=model, max_turns=max_turns, max_budget_usd=max_budget_usd
    )
    state: dict[str, Any] = {"n": 0, "missing": []}  # gate calls this run; what the last reply lacked
    prompt_text = prompt if callable(prompt) else CLARIFY_PROMPT.format(ask=prompt)

    def when(ctx: dict[str, Any]) -> bool:
        state["n"] = 0
        brief = read_brief(path)
        if brief is not None and brief.complete:
            ctx["_brief"] = brief
            ctx[name] = brief.prompt_block()
            _emit(ctx, Frozen(name=name, path=str(path)))
            return False
        return True

    async def gate(result: Any, ctx: dict[str, Any]) -> bool:
        state["n"] += 1
        brief = parse_brief(result.text)
        last = state["n"] > repair_rounds
        if brief.complete or (last and any(brief.values())):
            write_brief(path, brief)
            ctx["_brief"] = read_brief(path) or brief  # with the appendix the file already had
            if not brief.complete:
                await _emit_async(
                    ctx,
                    Warned(message=BRIEF_INCOMPLETE.format(file=path.name, missing=", ".join(brief.missing))),
                )
            return True
        state["missing"] = brief.missing
        return False

    def on_reject(result: Any, ctx: dict[str, Any]) -> str:
        return CLARIFY_REPAIR.format(missing=LIST_SEPARATOR.join(state["missing"] or [ALL_SECTIONS]))

    def reduce(result: Any, ctx: dict[str, Any]) -> str:
        block: str = ctx["_brief"].prompt_block()
        return block

    resume = CLARIFY_RESUME + (
        PERSON_ADDED.format(words=extra_resume.strip()) if extra_resume.strip() else ""
    )
    return Step(
        name,
        role,
        prompt_text,
        when=when,
        gate=gate,
        on_reject=on_reject,
        reduce=reduce,
        retries=repair_rounds,
        resume_prompt=resume,
    )


# -- 设定目标 --------------------------------------------------------------------------------------


def goal_setter(
    channel: HumanChannel | None = None,
    name: str = GOAL,
    *,
    model: str | None = None,
    max_turns: int | None = None,
    max_budget_usd: float | None = None,
) -> AgentSpec:
    """The role that writes 目标.md: reads the workspace (and may ask), never edits."""
    tools = list(READ_TOOLS) + (list(channel.tool_names) if channel else [])
    return AgentSpec(
        name=name,
        instructions=GOAL_RULES,
        allowed_tools=tools,
        model=model,
        max_turns=max_turns,
        max_budget_usd=max_budget_usd,
        mcp_servers=channel.mcp_servers() if channel else {},
        hooks=guard_hooks(allow_only(tools)),
    )


def read_goal(path: str | os.PathLike[str]) -> Goal | None:
    try:
        return parse_goal(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def _write_text(path: Path, text: str) -> None:
    write_atomic(path, text)


def goal_step(
    channel: HumanChannel | None,
    *,
    goal_path: str | os.PathLike[str],
    brief_key: str = CLARIFY,
    name: str = GOAL,
    always_set: bool = False,
    spec: AgentSpec | None = None,
    prompt: str | Callable[[dict[str, Any]], str] | None = None,
    model: str | None = None,
    max_turns: int | None = None,
    max_budget_usd: float | None = None,
    repair_rounds: int = 1,
) -> Step:
    """The step that derives 目标.md from the brief in ``ctx[brief_key]``.

    A complete 目标.md (a statement and at least one check) is frozen: skipped, content into
    ``ctx[name]`` / ``ctx["_goal"]`` — unless `always_set` (wake words: re-derive). Checks
    marked unverifiable are warned about at once. No resume_prompt: re-deriving needs the whole
    brief again, so a continued session is sent the prompt itself.
    """
    path = Path(goal_path)
    role = spec or goal_setter(channel, name, model=model, max_turns=max_turns, max_budget_usd=max_budget_usd)
    missing: list[str] = []  # what the last reply lacked
    source = prompt if prompt is not None else (lambda ctx: GOAL_PROMPT.format(brief=ctx.get(brief_key, "")))

    def when(ctx: dict[str, Any]) -> bool:
        goal = read_goal(path)
        if goal is not None and goal.complete and not always_set:
            ctx["_goal"] = goal
            ctx[name] = render_goal(goal)
            _emit(ctx, Frozen(name=name, path=str(path)))
            return False
        return True

    async def gate(result: Any, ctx: dict[str, Any]) -> bool:
        goal = parse_goal(result.text)
        if not goal.complete:
            missing[:] = [
                part
                for part, ok in ((f"# {GOAL_HEADING}", goal.statement), (f"# {CHECKS_HEADING}", goal.checks))
                if not ok
            ]
            return False
        _write_text(path, render_goal(goal))
        ctx["_goal"] = goal
        await _emit_async(ctx, GoalSet(path=str(path), statement=goal.statement, checks=goal.checks))
        if goal.unverifiable:
            await _emit_async(ctx, Warned(message=goal.warning()))
        return True

    def on_reject(result: Any, ctx: dict[str, Any]) -> str:
        return GOAL_REPAIR.format(missing=LIST_SEPARATOR.join(missing or [GOAL_UNRECOGNISED]))

    def reduce(result: Any, ctx: dict[str, Any]) -> str:
        return render_goal(ctx["_goal"])

    return Step(
        name, role, source, when=when, gate=gate, on_reject=on_reject, reduce=reduce, retries=repair_rounds
    )


# -- the judge loop ------------------------------------------------------------------------------


# long: a step builder: the nested closures it returns are the goal and judge rounds
def with_goal(
    step: Step,
    channel: HumanChannel | None,
    *,
    goal_path: str | os.PathLike[str],
    rounds: int = 3,
    can_run: bool = False,
    name: str | None = None,
    spec: AgentSpec | None = None,
) -> Step:
    """`step` with a gate that runs an independent judge against 目标.md after every round.

    * The judge is a fresh session every round, named ``<step>·判定#N`` in the manifest (N counts
      this process's rounds), run with the lineage hook detached: it never enters lineage.
    * achieved -> pass. not_yet (and anything ambiguous) -> the work session is resumed with the
      verdict's feedback (``<step>#roundN``). unreachable -> the person is asked (accept / change
      the goal / the judge is wrong); no answer -> StepAbort, remaining rounds unused.
    * ``retries = rounds - 1``. The verdict is in ``ctx["_verdict"]``.
    * No complete 目标.md at gate time: nothing to judge against — the round passes with a warning.
    """
    if rounds < 1:
        raise ConfigError(f"with_goal({step.name!r}): rounds must be >= 1 (got {rounds})")
    judge_name = name or f"{step.name}{JUDGE_SUFFIX}"
    role = spec or judge(judge_name, channel, can_run=can_run)
    path = Path(goal_path)
    follow: dict[str, str] = {"text": ""}
    user_gate = step.gate

    async def gate(result: Any, ctx: dict[str, Any]) -> bool:
        if user_gate is not None:
            passed = user_gate(result, ctx)
            if not (await passed if inspect.isawaitable(passed) else passed):
                return False  # hard conditions first: no judge for a round that already failed them
        follow["text"] = ""
        goal = read_goal(path)
        if goal is None or not goal.complete:
            await _emit_async(ctx, Warned(message=NO_GOAL_TO_JUDGE.format(file=path.name, step=step.name)))
            return True
        runtime = ctx["_runtime"]
        number = 1 + sum(1 for r in runtime.results if r.step.startswith(f"{judge_name}#"))
        run_name = f"{judge_name}#{number}"
        prompt = JUDGE_PROMPT.format(path=path, goal=path.read_text(encoding="utf-8").strip())
        await _emit_async(ctx, Judging(name=run_name))
        # The hook covers exactly one work run: a judge's session must never be recorded.
        hook, runtime.on_session = runtime.on_session, None
        try:
            verdict_run = await runtime.run(role, prompt, step_name=run_name, on_event=ctx.get("_on_event"))
        finally:
            runtime.on_session = hook
        if verdict_run.ok:
            verdict = parse_verdict(verdict_run.text)
        else:
            verdict = Verdict(note=JUDGE_UNFINISHED.format(error=verdict_run.error))
        ctx["_verdict"] = verdict
        await _emit_async(
            ctx,
            Judged(
                name=run_name,
                state=verdict.state,
                reason=verdict.reason,
                missing=verdict.missing,
                note=verdict.note,
                round=number,
                rounds=rounds,
            ),
        )
        if verdict.achieved:
            return True
        if verdict.state == "unreachable":
            return await _unreachable(step.name, verdict, channel, ctx, path, follow)
        follow["text"] = verdict.feedback()
        return False

    def on_reject(result: Any, ctx: dict[str, Any]) -> str:
        return follow["text"]

    return replace(step, gate=gate, on_reject=on_reject, retries=rounds - 1)


async def _unreachable(
    step: str,
    verdict: Verdict,
    channel: HumanChannel | None,
    ctx: dict[str, Any],
    goal_path: Path,
    follow: dict[str, Any],
) -> bool:
    reason = verdict.reason or JUDGE_NO_REASON
    answer = None
    if channel is not None:
        answer = await channel.ask(UNREACHABLE_QUESTION.format(step=step, reason=reason))
    if not answer:
        raise StepAbort(UNREACHABLE_UNANSWERED.format(reason=reason))
    choice = answer.strip()
    head = choice[:1]
    if head == "1" or choice.lower() in ACCEPT_WORDS:
        await _emit_async(ctx, Warned(message=ACCEPTED_AS_DONE.format(step=step)))
        return True
    if head == "3" or choice.lower() in OVERRULE_WORDS:
        follow["text"] = OVERRULED.format(reason=reason)
        return False
    words = choice[1:].strip(ANSWER_SEPARATORS) if head == "2" else choice
    words = words or choice
    goal = read_goal(goal_path)
    if goal is not None and goal.complete:
        goal.statement = f"{goal.statement}\n{CHANGED_MARK.format(words=words)}"
        _write_text(goal_path, render_goal(goal))
    if channel is not None:
        channel.amend(words)  # the brief records it too, so later steps and wakes see it
    follow["text"] = GOAL_CHANGED.format(words=words)
    return False


# -- the starter flow ------------------------------------------------------------------------------


def brief_path(workbench: Workbench) -> Path:
    return workbench.notes / BRIEF_FILE


def goal_path(workbench: Workbench) -> Path:
    return workbench.notes / GOAL_FILE


def in_progress(
    workspace: str | os.PathLike[str] = ".",
    *,
    run_dir: str | os.PathLike[str] = "runs",
    workbench: Workbench | None = None,
) -> bool:
    """Something to continue here: a complete 需求.md, or a live session recorded in lineage (a
    run that died before the brief was frozen still continues). Read-only."""
    wb = workbench or Workbench(workspace)
    state = wake_state(workspace, run_dir=run_dir, brief_path=brief_path(wb), goal_path=goal_path(wb))
    return bool(state["waking"] or state["steps"])


# long: the starter flow's whole shape in one reading: its steps, judge rounds and their wiring
def starter_flow(
    ask: str = "",
    *,
    workspace: str | os.PathLike[str] = ".",
    run_dir: str | os.PathLike[str] = "runs",
    new: bool = False,
    isolate: bool = False,
    clarify_only: bool = False,
    goal: bool = True,
    rounds: int = 3,
    judge_can_run: bool = False,
    max_asks: int | None = None,
    timeout_s: float = 1800.0,
    ask_fn: Any = None,
    on_event: Callable[[str, dict[str, Any]], Any] | None = None,
    workbench: Workbench | None = None,
    model: str | None = None,
) -> Workflow:
    """确认需求 -> 设定目标 -> 干活 (judge rounds ``干活·判定#N``).

    On a directory already in progress (a complete 需求.md, or steps in lineage), a non-empty
    `ask` is a *wake with words*: appended to 需求.md under ``## 唤醒时追加``, sent as the
    work step's resume prompt, and 目标.md is re-derived. An empty `ask` is a silent wake: frozen
    steps are skipped and nothing is re-derived. `new=True` archives first.

    The flow owns its HumanChannel (``notes/问答记录.md``, amending 需求.md) and Workbench
    (``<workspace>/.flower``), both attached to the Workflow: build the Runtime with
    ``Runtime(workbench=wf.workbench)``. ValueError (one line): `isolate` outside a git
    repository, nothing to do (empty `ask` and nothing in progress), `rounds` < 1.
    """
    ws = Path(workspace).resolve()
    if not ws.is_dir():
        raise WorkspaceError(f"workspace {ws} is not a directory: create it or pass -w DIR")
    if rounds < 1:
        raise ConfigError(f"rounds must be >= 1 (got {rounds})")
    if isolate:
        require_git(ws)
    wb = (workbench or Workbench(ws)).ensure()
    brief_file, goal_file = brief_path(wb), goal_path(wb)
    if new and any(p.exists() for p in (Path(run_dir) / LINEAGE_FILE, brief_file, goal_file)):
        start_over(
            ws, run_dir=run_dir, brief_path=brief_file, goal_path=goal_file, into=wb.notes / ARCHIVE_DIR
        )
    words = (ask or "").strip()
    waking = in_progress(ws, run_dir=run_dir, workbench=wb)
    if not words and not waking:
        raise ConfigError(f'nothing to do in {ws}: say what you want, e.g. flower "make hello.txt say hi"')
    wake_words = words if waking else ""
    if wake_words:
        append_wake_words(brief_file, wake_words)  # lands in 需求.md before any step reads it
    channel = HumanChannel(
        log_path=wb.notes / QA_FILE,
        timeout_s=timeout_s,
        max_asks=max_asks,
        amend_path=brief_file,
        on_event=on_event,
        ask_fn=ask_fn,
    )
    steps = [
        clarify_step(
            channel, brief_path=brief_file, prompt=words or WORK_RESUME, model=model, extra_resume=wake_words
        )
    ]
    if not clarify_only:
        if goal:
            steps.append(goal_step(channel, goal_path=goal_file, always_set=bool(wake_words), model=model))
        work = Step(
            WORK,
            _work_spec(channel, ws, wb, isolate, model),
            _work_prompt(goal),
            resume_prompt=WAKE_PROMPT.format(words=wake_words) if wake_words else WORK_RESUME,
        )
        if goal:
            work = with_goal(work, channel, goal_path=goal_file, rounds=rounds, can_run=judge_can_run)
        steps.append(work)
    return Workflow(steps, name="starter", channel=channel, workbench=wb)


def _work_spec(channel: HumanChannel, ws: Path, wb: Workbench, isolate: bool, model: str | None) -> AgentSpec:
    workers = {"coder": worker(CODER_DESCRIPTION, CODER_PROMPT, isolate=isolate)}
    return coordinator(
        COORDINATOR,
        WORK_INSTRUCTIONS,
        workers,
        channel=channel,
        model=model,
        workspace=ws if isolate else None,
        workbench=wb,
    )


def _work_prompt(with_goal_block: bool) -> Callable[[dict[str, Any]], str]:
    def prompt(ctx: dict[str, Any]) -> str:
        text = WORK_PROMPT.format(brief=ctx.get(CLARIFY, ""))
        if with_goal_block and ctx.get(GOAL):
            text += WORK_GOAL.format(goal=ctx[GOAL])
        return text

    return prompt


__all__ = [
    "CLARIFY_RESUME",
    "clarify_step",
    "goal_setter",
    "goal_step",
    "in_progress",
    "starter_flow",
    "with_goal",
]
