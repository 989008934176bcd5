"""Step and Workflow: how steps share ctx, retry and stop, and continue their sessions across processes.

One step = one `Runtime.run` = one session. Two retry layers never mix: `Step.retries` is for
business failure (not ok, gate said no); the runtime's resilience handles infrastructure.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flower.catalogue.runtime import LIMITS_TIMED_OUT
from flower.errors import StepAbort, WorkflowError
from flower.events import StepStarted
from flower.flows.continuity import ContinuityLog, decide, first_run
from flower.flows.lineage import Lineage
from flower.full_disk import FullDisk
from flower.protocols import EventSink, PersonChannel, StepRunner, WorkbenchLike
from flower.result import StepResult
from flower.spec import AgentSpec

ON_FAIL = ("stop", "skip", "continue")


async def _call(step: Step, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call a step's callback; an exception in user code becomes one WorkflowError naming the
    step and the callback (StepAbort passes through: it is how a gate gives up)."""
    try:
        return await _maybe_await(fn(*args))
    except (StepAbort, WorkflowError):
        raise
    except Exception as exc:
        raise WorkflowError(f"step {step.name!r}: its {what} raised {type(exc).__name__}: {exc}") from exc


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


@dataclass
class Step:
    name: str
    spec: AgentSpec
    prompt: str | Callable[[dict[str, Any]], str]
    resume_from: str | None = None
    fork: bool = False
    retries: int = 0
    gate: Callable[..., Any] | None = None
    on_fail: str = "stop"
    when: Callable[..., Any] | None = None
    on_reject: Callable[..., Any] | None = None
    resume_prompt: str | Callable[[dict[str, Any]], str] | None = None
    reduce: Callable[[StepResult, dict[str, Any]], Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise WorkflowError("a step needs a non-empty name")
        # ctx keys starting with '_' are flower's: Workflow.run writes _runtime, _on_event, _sessions,
        # _results, _lineage, _woke, _aborted and _failed_at; the starter flow _brief, _goal, _verdict.
        if self.name.startswith("_"):
            raise WorkflowError(
                f"step {self.name!r}: names starting with '_' are reserved for ctx keys; rename it"
            )
        if "#" in self.name or "·" in self.name:
            raise WorkflowError(f"step {self.name!r}: '#' and '·' mark attempts and judges; rename it")
        if self.on_fail not in ON_FAIL:
            raise WorkflowError(
                f"step {self.name!r}: on_fail={self.on_fail!r} is not one of {', '.join(ON_FAIL)}"
            )
        if self.reduce is not None and inspect.iscoroutinefunction(self.reduce):
            raise WorkflowError(f"step {self.name!r}: reduce must be a plain (sync) function")
        if not isinstance(self.retries, int) or self.retries < 0:
            raise WorkflowError(f"step {self.name!r}: retries must be an int >= 0 (got {self.retries!r})")
        if self.fork and not self.resume_from:
            raise WorkflowError(f"step {self.name!r}: fork=True needs resume_from=<earlier step>")

    def render(self, ctx: dict[str, Any], *, resuming: bool = False) -> str:
        source = self.resume_prompt if (resuming and self.resume_prompt is not None) else self.prompt
        if not callable(source):
            return str(source)
        try:
            text = source(ctx)
        except Exception as exc:
            raise WorkflowError(
                f"step {self.name!r}: its prompt function raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(text, str):
            raise WorkflowError(
                f"step {self.name!r}: its prompt function returned {type(text).__name__}, not str"
            )
        return text


class Workflow:
    def __init__(
        self,
        steps: list[Step],
        *,
        name: str = "workflow",
        context: dict[str, Any] | None = None,
        channel: PersonChannel | None = None,
        workbench: WorkbenchLike | None = None,
        continuous: bool = True,
    ) -> None:
        self.steps = list(steps)
        self.name = name
        self.context: dict[str, Any] = context if context is not None else {}
        self.channel = channel
        self.workbench = workbench
        self.continuous = continuous
        self._continuity: ContinuityLog | None = None
        self._first_run = False
        self._validate()

    def _validate(self) -> None:
        seen: set[str] = set()
        for step in self.steps:
            if not isinstance(step, Step):
                raise WorkflowError(f"workflow {self.name!r}: {step!r} is not a Step")
            if step.name in seen:
                raise WorkflowError(f"step {step.name!r}: the name is used twice; step names must be unique")
            if step.resume_from is not None and step.resume_from not in seen:
                raise WorkflowError(
                    f"step {step.name!r}: resume_from={step.resume_from!r} names no earlier step"
                )
            seen.add(step.name)

    async def run(
        self,
        runtime: StepRunner,
        *,
        on_event: EventSink | None = None,
        on_step: Callable[..., Any] | None = None,
    ) -> dict[str, Any]:
        ctx = self.context
        ctx["_runtime"] = runtime
        ctx["_on_event"] = on_event
        ctx.setdefault("_sessions", {})
        ctx.setdefault("_results", {})
        ctx.pop("_failed_at", None)
        ctx.pop("_aborted", None)
        ctx.pop("_disk_full", None)
        run_dir = getattr(runtime, "run_dir", None)
        full_disk: FullDisk | None = getattr(runtime, "full_disk", None)
        self._first_run = run_dir is not None and first_run(run_dir)
        self._continuity = (
            ContinuityLog(
                run_dir, str(getattr(runtime, "run_id", "")), getattr(runtime, "run_stamp", None), full_disk
            )
            if run_dir
            else None
        )
        lineage = self._open_lineage(runtime, full_disk)
        ctx["_lineage"] = lineage
        ctx["_woke"] = lineage.woke if lineage else 0
        total = len(self.steps)
        for index, step in enumerate(self.steps, start=1):
            if step.when is not None and not await _call(step, "when", step.when, ctx):
                continue  # skipped entirely: no result, no session
            result, passed = await self._run_step(runtime, step, ctx, index, total, lineage, on_event)
            ctx["_results"][step.name] = result
            if result.session_id:
                ctx["_sessions"][step.name] = result.session_id
            if on_step is not None:
                await _maybe_await(on_step(step.name, result))
            if full_disk is not None and full_disk.first:
                # What this step left may not be saved: no further step builds on it.
                ctx["_disk_full"] = (step.name, full_disk.reason(step.name))
                break
            if passed:
                ctx[step.name] = (
                    await _call(step, "reduce", step.reduce, result, ctx) if step.reduce else result.text
                )
                continue
            if step.on_fail == "continue":
                ctx[step.name] = result.text  # incomplete; reduce not applied
            elif step.on_fail == "stop":
                ctx["_failed_at"] = step.name
                break
        return ctx

    def _open_lineage(self, runtime: StepRunner, full_disk: FullDisk | None) -> Lineage | None:
        if not self.continuous:
            return None
        lineage = Lineage.load(runtime.run_dir, runtime.workspace, runtime.has_session)
        lineage.full_disk = full_disk
        lineage.bump_woke()
        return lineage

    async def _run_step(
        self,
        runtime: StepRunner,
        step: Step,
        ctx: dict[str, Any],
        index: int,
        total: int,
        lineage: Lineage | None,
        on_event: EventSink | None,
    ) -> tuple[StepResult, bool]:
        # Where the first attempt starts: an earlier step's session, or this step's own
        # session from a previous process, or a fresh one.
        base_resume, fork = _resumed_from(step, ctx)
        continuing = None
        if lineage is not None and step.resume_from is None:
            continuing = lineage.steps.get(step.name)
        self._record_continuity(runtime, step, lineage, base_resume)
        if on_event is not None:
            started = StepStarted(
                name=step.name,
                index=index,
                total=total,
                resumed=bool(continuing),
                woke=lineage.woke if lineage else 0,
            )
            await _maybe_await(on_event(started.kind, started.payload()))

        resume = continuing or base_resume
        prompt = step.render(ctx, resuming=bool(continuing))
        mode_name = step.name
        result: StepResult | None = None
        verdict = False
        for attempt in range(1, step.retries + 2):
            result = await self._attempt(runtime, step, mode_name, prompt, resume, fork, lineage, on_event)
            verdict, aborted = await self._judge(step, result, ctx)
            timed_out = (result.error or "").startswith(LIMITS_TIMED_OUT)  # a retry would start past it
            if verdict or aborted or timed_out or attempt > step.retries:
                break
            follow = ""
            if step.on_reject is not None and result.ok and result.session_id:
                follow = await _call(step, "on_reject", step.on_reject, result, ctx) or ""
            if follow:
                # Resume the rejected session with the feedback; never fork a round.
                mode_name, prompt, resume, fork = (
                    f"{step.name}#round{attempt + 1}",
                    follow,
                    result.session_id,
                    False,
                )
            else:
                mode_name, prompt = f"{step.name}#retry{attempt}", step.render(ctx)
                resume, fork = base_resume, step.fork
        assert result is not None
        return result, verdict

    def _record_continuity(
        self, runtime: StepRunner, step: Step, lineage: Lineage | None, base_resume: str | None
    ) -> None:
        """Why this step continues or starts fresh, for the records (continuity.json)."""
        if self._continuity is not None:
            self._continuity.add(
                decide(
                    step.name,
                    lineage,
                    resume_from=step.resume_from,
                    resumed_session=base_resume,
                    store_was_new=bool(getattr(runtime, "store_was_new", False)),
                    first_run=self._first_run,
                )
            )

    async def _attempt(
        self,
        runtime: StepRunner,
        step: Step,
        name: str,
        prompt: str,
        resume: str | None,
        fork: bool,
        lineage: Lineage | None,
        on_event: EventSink | None,
    ) -> StepResult:
        # The lineage hook covers exactly this one run; judges run with it detached.
        if lineage is not None:
            runtime.on_session = lambda _name, sid: lineage.record(step.name, sid)
        try:
            result: StepResult = await runtime.run(
                step.spec,
                prompt,
                step_name=name,
                resume=resume,
                fork=fork and bool(resume),
                on_event=on_event,
            )
        finally:
            runtime.on_session = None
        return result

    @staticmethod
    async def _judge(step: Step, result: StepResult, ctx: dict[str, Any]) -> tuple[bool, bool]:
        """(passed, aborted). The gate is never called for a failed result, and once per attempt."""
        if not result.ok:
            return False, False
        if step.gate is None:
            return True, False
        try:
            return bool(await _call(step, "gate", step.gate, result, ctx)), False
        except StepAbort as abort:
            ctx["_aborted"] = abort.reason
            return False, True


def _resumed_from(step: Step, ctx: dict[str, Any]) -> tuple[str | None, bool]:
    """(the earlier step's session this step resumes, whether it forks it); (None, False) without
    `resume_from`."""
    if step.resume_from is None:
        return None, False
    session = ctx["_sessions"].get(step.resume_from)
    if not session:
        raise WorkflowError(
            f"step {step.name!r}: resume_from={step.resume_from!r} but that step produced no session "
            "(skipped by `when` or never ran)"
        )
    return session, step.fork
