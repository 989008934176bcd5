"""Runtime: one `run()` = one step = one session of the real Claude Code CLI.

The runtime owns the run directory (sessions.db, manifest.json, the CLI's config dir), turns
whatever the CLI does — success, API errors, crashes, interrupts — into a StepResult, and
resumes the same session across infrastructure failures. It composes one module per concern:

* `sessions.py` — sessions.db and the pruned, trimmed store the CLI resumes from;
* `attempt.py` — one CLI process's messages as a state machine (read here, `_attempt`);
* `handover.py` — handoff: past the threshold the turn is interrupted, the session writes its
  handoff document and a fresh successor takes over inside the same `run()`
  (`StepResult.retired` lists the sessions it replaced);
* `wrap_up.py` — the limits: each session starts with the time and budget left, notices as
  shares are used, and at the deadline the session writes its notes (收尾-<step>.md) within the
  wrap-up window; the step then ends as timed out, its session kept for the next wake;
* `hooks.py` — the spill hook and the notices' hook added to a role's own;
* `interrupts.py` and `inflight.py` — a person's interrupt, and the rescue of the step in
  flight when a signal ends the process;
* `resilience.py` — retry, back off, wait for the network, resume.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookCallback,
    MirrorErrorMessage,
    ProcessError,
    ResultError,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolUseBlock,
)

from flower.catalogue.names import MANIFEST_FILE, SESSIONS_DB
from flower.clock import now_iso
from flower.context.handoff import Handoff, doc_path, is_overflow, seed_prompt, write_prompt
from flower.context.store import context_tokens
from flower.context.workbench import notes_dir
from flower.errors import ConfigError, WorkspaceError
from flower.events import (
    AssistantText,
    HandedOver,
    HandoffDegraded,
    Interrupted,
    Offline,
    Retried,
    SessionKnown,
    ToolCalled,
)
from flower.exitinfo import STAMP_ENV
from flower.full_disk import FullDisk
from flower.protocols import SessionHook, WorkbenchLike
from flower.result import StepResult
from flower.runtime.attempt import Attempt, AttemptState, Phase, conclude
from flower.runtime.emit import EventHook, emit
from flower.runtime.handover import keep_reply, watch_context, write_degraded
from flower.runtime.hooks import session_hooks
from flower.runtime.inflight import InFlight
from flower.runtime.interrupts import Interrupts
from flower.runtime.limits import Limits
from flower.runtime.manifest import Manifest, new_run_id
from flower.runtime.resilience import Resilience, classify_result, endpoint, model_socket_of, reachable
from flower.runtime.sessions import Sessions
from flower.runtime.signals import bundled_cli, shielded_cli
from flower.runtime.turns import answers
from flower.runtime.wrap_up import WrapUp
from flower.spec import AgentSpec, tool_base

INTERRUPTED = "interrupted-by-human"
HANDOFF_DUE = "context-full-handoff"
SYNTHETIC_MODEL = "<synthetic>"

MAX_INPUT_CHARS = 1000


def compact_input(value: Any) -> Any:
    """A tool input as the manifest keeps it: long strings (a Write's whole file, say) become
    their head plus a digest, so rows stay small yet two runs' calls still compare exactly."""
    if isinstance(value, str) and len(value) > MAX_INPUT_CHARS:
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return f"{value[:200]}… [{len(value)} chars, sha256:{digest}]"
    if isinstance(value, dict):
        return {k: compact_input(v) for k, v in value.items()}
    if isinstance(value, list):
        return [compact_input(v) for v in value]
    return value


def _session_of(msg: Any) -> str:
    if isinstance(msg, SystemMessage):
        return str(msg.data.get("session_id") or "")
    return str(getattr(msg, "session_id", "") or "")


@dataclass
class Start:
    """How the next CLI process of a step starts: which session, with what prompt."""

    session: str | None
    prompt: str
    fork: bool = False
    at: str | None = None


@dataclass
class Progress:
    """A step's count so far: attempts in the resilience sense (a handoff successor is not
    one) and handoff generations."""

    attempt: int = 1
    generations: int = 0


class Runtime:
    INTERRUPTED = INTERRUPTED
    HANDOFF_DUE = HANDOFF_DUE

    def __init__(
        self,
        *,
        workspace: str | os.PathLike[str] = ".",
        run_dir: str | os.PathLike[str] = "runs",
        portable: bool = True,
        trim: bool = False,
        ephemeral: bool = True,
        keep_denials: int = 1,
        workbench: bool | str | os.PathLike[str] | WorkbenchLike | None = False,
        spill_threshold: int = 4000,
        resilience: bool | Resilience = True,
        handoff: bool | Handoff = True,
        env: dict[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
        cli_path: str | None = None,
        shield_cli: bool = True,
        limits: Limits | None = None,
    ) -> None:
        """`environ`: the process environment the Claude CLI inherits, as read where the process
        started (the `flower` command passes its own). It tells the offline probe which endpoint
        the CLI calls, and FLOWER_RUN_STAMP the run's stamp; `env` and each spec's env go over it."""
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise WorkspaceError(f"workspace {self.workspace} is not a directory: create it or pass -w DIR")
        # run_dir is relative to the current directory, not to the workspace.
        self.run_dir = Path(run_dir).resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.portable, self.trim, self.ephemeral = portable, trim, ephemeral
        self.keep_denials, self.spill_threshold = keep_denials, spill_threshold
        self.env, self.environ = dict(env or {}), dict(environ or {})
        self.run_stamp = self.environ.get(STAMP_ENV) or None
        self.cli_path, self.shield_cli = cli_path, shield_cli
        self.sessions = Sessions(
            self.run_dir, self.workspace, trim=trim, ephemeral=ephemeral, keep_denials=keep_denials
        )
        self.project_key, self.store_was_new = self.sessions.project_key, self.sessions.was_new
        self.sqlite, self.store = self.sessions.sqlite, self.sessions.store
        self.resilience = Resilience.from_value(resilience)
        self.handoff = Handoff.from_value(handoff)
        self.workbench = workbench
        self.run_id = new_run_id()
        self.manifest = Manifest(self.run_dir / MANIFEST_FILE, self.run_id)
        self.full_disk = FullDisk(self.run_dir)
        self.results: list[StepResult] = []
        self.on_session: SessionHook | None = None
        self.limits = limits or Limits()
        self.wrap_up = WrapUp(self.limits)
        self._inflight = InFlight()
        self._interrupts = Interrupts()
        self._stderr_tail: deque[str] = deque(maxlen=20)
        self._launcher: str | None = None

    # -- where things are -----------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.manifest.path

    @property
    def config_dir(self) -> Path:
        return self.run_dir / ".claude"

    @property
    def workbench_dir(self) -> Path | None:
        """Root of the workbench (spill goes to ``<root>/spill``), or None when it is off.

        ``True`` means ``<run_dir>/workbench``; a Workbench object or a path is used as is.
        """
        wb = self.workbench
        if wb is None or wb is False:
            return None
        if wb is True:
            return self.run_dir / "workbench"
        return Path(os.fspath(wb)).resolve()

    @property
    def notes_dir(self) -> Path:
        """Where handoff documents go: Handoff.notes_dir, the Workbench's notes/, or
        ``<workspace>/.flower/notes`` (the default Workbench's)."""
        if self.handoff.notes_dir is not None:
            return Path(self.handoff.notes_dir).resolve()
        notes = getattr(self.workbench, "notes", None)
        if notes is not None:
            return Path(notes)
        return notes_dir(self.workspace)

    # -- queries --------------------------------------------------------------------------
    def has_session(self, session_id: str) -> bool:
        return self.sessions.has(session_id)

    def context_of(self, session_id: str) -> int | None:
        return self.sessions.context_of(session_id)

    def total_cost(self) -> float:
        return round(sum(r.cost_usd for r in self.results), 6)

    @property
    def in_flight(self) -> list[StepResult]:
        """The steps being run now (a gate's judge may run inside a step's run)."""
        return list(self._inflight.results)

    def cli_environment(self, spec: AgentSpec) -> dict[str, str]:
        """The environment the CLI runs in for `spec`: the process's, then the runtime's, then the spec's."""
        return {**self.environ, **self.env, **spec.env}

    def limit_hook(self) -> HookCallback:
        """The PostToolUse hook that passes on the limits' notices (flower.runtime.wrap_up)."""
        return self.wrap_up.hook()

    # -- the run: attempts until the step is done -------------------------------------------
    async def run(
        self,
        spec: AgentSpec,
        prompt: str,
        *,
        step_name: str | None = None,
        resume: str | None = None,
        fork: bool = False,
        resume_at: str | None = None,
        on_event: EventHook | None = None,
    ) -> StepResult:
        if (fork or resume_at) and not resume:
            raise ConfigError("fork and resume_at need resume=<session id>")
        result = StepResult(step=step_name or spec.name, resumed=bool(resume))
        self._inflight.start(result)
        start: Start | None = Start(resume, prompt, fork, resume_at)
        progress = Progress()
        try:
            while start is not None:
                start = await self._next(spec, prompt, result, start, progress, on_event)
        except Exception as exc:  # noqa: BLE001 — bookkeeping failed; the row must still be written
            result.ok = False
            result.error = f"internal error: {type(exc).__name__}: {exc}"
            result.errors.append(result.error)
        finally:
            result.attempts = progress.attempt
            result.ended_at = now_iso("milliseconds")
            self._interrupts.clear()
            to_record = self._inflight.finish(result)  # False: rescue() already wrote it
        if to_record:
            self._record(result)
        return result

    async def _next(
        self,
        spec: AgentSpec,
        task: str,
        result: StepResult,
        start: Start,
        progress: Progress,
        on_event: EventHook | None,
    ) -> Start | None:
        """One CLI process, then how the next one starts: None when the step is done."""
        may_hand_off = self.handoff.enabled and progress.generations < self.handoff.max_generations
        got = await self._attempt(spec, start, result, on_event, may_hand_off)
        # A successor that overflows before its first answer would only hand over again.
        progressed = progress.generations == 0 or got.context > 0
        if got.handoff_doc is None and not got.ok and may_hand_off and result.session_id and progressed:
            if is_overflow(got.error, got.terminal_reason):
                # The session can no longer take any request: write the document for it.
                got.handoff_doc = write_degraded(self.notes_dir, result, task, got)
                await emit(on_event, HandoffDegraded(error=got.error))
        _absorb(result, got)
        if got.timed_out:
            result.errors.append(got.error or "timeout")
            return None  # the deadline is not an infrastructure failure: no retry
        if got.handoff_doc is not None:
            return await self._successor(got.handoff_doc, task, result, progress, on_event)
        if got.ok:
            return None
        return await self._retry(spec, got, result, start, progress, on_event)

    async def _successor(
        self, doc: Path, task: str, result: StepResult, progress: Progress, on_event: EventHook | None
    ) -> Start:
        """A fresh session takes over, seeded with the handoff document."""
        progress.generations += 1
        retiring = result.session_id
        await emit(on_event, HandedOver(doc=str(doc), retiring=retiring, generation=progress.generations))
        return Start(None, seed_prompt(doc, doc.read_text(encoding="utf-8"), task))

    async def _retry(
        self,
        spec: AgentSpec,
        got: Attempt,
        result: StepResult,
        start: Start,
        progress: Progress,
        on_event: EventHook | None,
    ) -> Start | None:
        """A failed attempt: None when it is not retried, else how the retry starts."""
        policy = self.resilience
        result.errors.append(got.error or "unknown error")
        kind = (
            "fatal"
            if got.internal
            else classify_result(got.error or "", got.api_error_status, got.terminal_reason)
        )
        if not policy.should_retry(kind, progress.attempt):
            return None
        if self.full_disk.check_space():
            return None  # its run directory is full: a retry could not save its turns either
        await emit(on_event, Retried(attempt=progress.attempt, error_kind=kind, error=got.error))
        if not await self._pause(progress.attempt, spec, on_event):
            result.errors.append(f"offline for more than {policy.max_offline_wait:.0f} s; gave up")
            return None
        progress.attempt += 1
        if not result.session_id:
            return start
        # Continue the interrupted conversation rather than start over.
        result.resumed = True
        return Start(result.session_id, policy.resume_prompt)

    async def _pause(self, attempt: int, spec: AgentSpec, on_event: EventHook | None) -> bool:
        """Back off; when the endpoint is unreachable, wait for it by probing instead.

        False when the endpoint stayed unreachable for `max_offline_wait`.
        """
        policy = self.resilience
        env = self.cli_environment(spec)
        try:
            host, port = endpoint(env)
        except ValueError:
            await anyio.sleep(policy.delay(attempt))
            return True
        if await anyio.to_thread.run_sync(reachable, host, port, policy.probe_timeout, model_socket_of(env)):
            await anyio.sleep(policy.delay(attempt))
            return True
        await emit(on_event, Offline(host=host, port=port, via=model_socket_of(env)))
        return await policy.wait_online(env=env)

    def _record(self, result: StepResult) -> None:
        self.results.append(result)
        try:
            self.manifest.write([r.to_row(self.run_id) for r in self.results])
        except OSError as exc:
            # A full disk: the rows stay in memory and the next write puts them all down.
            if not self.full_disk.note(MANIFEST_FILE, exc):
                raise
        if not result.ok:
            self.full_disk.check_space()

    # -- one CLI process --------------------------------------------------------------------
    def _options(
        self, spec: AgentSpec, resume: str | None = None, fork: bool = False, resume_at: str | None = None
    ) -> ClaudeAgentOptions:
        env = {**self.resilience.cli_env(), **self.env, **spec.env}
        if self.portable:
            # The CLI's own files live inside run_dir, so a run directory is self-contained.
            env.setdefault("CLAUDE_CONFIG_DIR", str(self.config_dir))
        if self.handoff.enabled:
            env.update(self.handoff.cli_env())  # forced: a silent compaction would defeat handoff
        elif spec.compact is False:
            env.setdefault("DISABLE_AUTO_COMPACT", "1")
        tools = [tool_base(t) for t in spec.allowed_tools if not t.startswith("mcp__")]
        if spec.agents and "Agent" not in tools:
            tools.append("Agent")
        notices = self.wrap_up.hook() if self.wrap_up.notices else None
        kwargs: dict[str, Any] = dict(
            cwd=str(self.workspace),
            env=env,
            system_prompt={"type": "preset", "preset": "claude_code", "append": spec.instructions},
            tools=tools,
            allowed_tools=list(spec.allowed_tools),
            disallowed_tools=list(spec.disallowed_tools),
            permission_mode=spec.permission_mode,
            model=spec.model,
            max_turns=spec.max_turns,
            max_budget_usd=spec.max_budget_usd,
            mcp_servers=dict(spec.mcp_servers),
            hooks=session_hooks(spec, self.workbench_dir, self.spill_threshold, notices),
            agents=spec.agents,
            session_store=self.store,
            session_store_flush="eager",
            resume=resume,
            fork_session=bool(fork and resume),
            resume_session_at=resume_at,
            # Piped, so a CLI in its own process group never writes to the terminal, and a
            # crash can be explained with its last lines.
            stderr=self._stderr_tail.append,
        )
        if spec.effort:
            kwargs["effort"] = spec.effort
        cli = self._cli()
        if cli:
            kwargs["cli_path"] = cli
        return ClaudeAgentOptions(**kwargs)

    def _cli(self) -> str | None:
        if not self.shield_cli:
            return self.cli_path
        if self._launcher is None:
            self._launcher = shielded_cli(self.cli_path or bundled_cli(), self.run_dir / ".cli") or ""
        return self._launcher or self.cli_path

    async def _attempt(
        self,
        spec: AgentSpec,
        start: Start,
        result: StepResult,
        on_event: EventHook | None,
        may_hand_off: bool,
    ) -> Attempt:
        """One CLI process: send the prompt, read messages until the state machine is done."""
        state = AttemptState()
        self._stderr_tail.clear()
        if self.limits.past_deadline(time.time()):
            state.got.timed_out = True  # no session starts after the deadline
            return conclude(state)
        opening = await self.wrap_up.opening(self.notes_dir, result.step, start.session, on_event)
        try:
            async with ClaudeSDKClient(self._options(spec, start.session, start.fork, start.at)) as client:
                self._inflight.client, self._inflight.loop = client, asyncio.get_running_loop()
                with anyio.CancelScope() as reading:
                    timer = asyncio.ensure_future(self.wrap_up.deadline(state, client, reading))
                    try:
                        await state.prompt(client, opening + start.prompt)
                        await self._read(client, state, result, start.prompt, on_event, may_hand_off)
                    finally:
                        timer.cancel()
                if reading.cancelled_caught:  # the wrap-up window passed and the turn never stopped
                    self.wrap_up.stopped_at_deadline(self.notes_dir, state, result, start.prompt)
        except ResultError as exc:
            state.got.error = _result_error_text(exc)
            state.got.api_error_status = exc.api_error_status
            state.got.terminal_reason = exc.terminal_reason
        except (ProcessError, OSError, RuntimeError, ValueError) as exc:
            state.got.error = f"{type(exc).__name__}: {exc}{self._stderr_hint()}"
        except Exception as exc:  # noqa: BLE001 — a step never raises out of the runtime
            state.got.error = f"internal error: {type(exc).__name__}: {exc}"
            state.got.internal = True
        finally:
            self._inflight.client = None
        return conclude(state)

    async def _read(
        self,
        client: ClaudeSDKClient,
        state: AttemptState,
        result: StepResult,
        task: str,
        on_event: EventHook | None,
        may_hand_off: bool,
    ) -> None:
        """The CLI's messages, until the state machine says the attempt is done."""
        async for msg in client.receive_messages():
            await self._note_session(result, _session_of(msg), on_event)
            state.background.note(msg)
            if isinstance(msg, MirrorErrorMessage):  # sessions.db could not take the turn's entries
                self.full_disk.note(SESSIONS_DB, msg.error)
            elif isinstance(msg, AssistantMessage):
                await self._on_assistant(msg, state, client, on_event, may_hand_off)
            elif isinstance(msg, ResultMessage) and await self._on_result(
                msg, state, client, result, task, on_event
            ):
                return

    async def _on_assistant(
        self,
        msg: AssistantMessage,
        state: AttemptState,
        client: ClaudeSDKClient,
        on_event: EventHook | None,
        may_hand_off: bool,
    ) -> None:
        """The model spoke: keep the main thread's text and tool calls; watch the context."""
        got = state.got
        if msg.model == SYNTHETIC_MODEL or msg.error:
            state.synthetic = "".join(b.text for b in msg.content if isinstance(b, TextBlock))
            return
        got.model = msg.model or got.model
        if msg.parent_tool_use_id is not None:
            return  # subagent speech never becomes the step's text
        if msg.usage:
            got.context = context_tokens(msg.usage)
            await watch_context(self.handoff, state, client, on_event, may_hand_off)
        for block in msg.content:
            if isinstance(block, TextBlock) and block.text:
                state.add_text(msg.message_id or str(id(msg)), block.text)
                await emit(on_event, AssistantText(text=block.text))
            elif isinstance(block, ToolUseBlock):
                got.tool_calls.append({"name": block.name, "input": compact_input(block.input)})
                await emit(on_event, ToolCalled(name=block.name, input=block.input))

    async def _on_result(
        self,
        msg: ResultMessage,
        state: AttemptState,
        client: ClaudeSDKClient,
        result: StepResult,
        prompt: str,
        on_event: EventHook | None,
    ) -> bool:
        """A turn ended. True when the attempt is done; False when the session goes on (a
        person's interrupt, our handoff interrupt, a background subagent still to come)."""
        got = state.got
        got.cost_usd += msg.total_cost_usd or 0.0
        self.wrap_up.spent_here += msg.total_cost_usd or 0.0
        got.num_turns += msg.num_turns or 0
        if not state.answered and not answers(msg, state.sent):
            return False  # a turn the CLI began itself (a task's notice): our prompt waits its turn
        state.answered = True
        aborted = (msg.terminal_reason or "").startswith("aborted")
        follow_up = await self._interrupts.take(
            usable=aborted or not msg.is_error, default=self.resilience.resume_prompt
        )
        if follow_up is not None:
            # One Ctrl-C: same session, same process, not a failed attempt.
            await emit(on_event, Interrupted(message=follow_up))
            await state.prompt(client, follow_up)
            self._interrupts.sent()
            return False
        if state.phase is Phase.TIME_UP:
            return await self.wrap_up.time_up(msg, state, client, self.notes_dir, result.step, on_event)
        if state.phase is Phase.WRAPPING:
            reply = state.last_reply() if not msg.is_error else ""
            self.wrap_up.wrapped(self.notes_dir, state, result, prompt, reply)
            return True
        if state.phase is Phase.DUE and aborted:
            # Our own interrupt landed: ask the full session for its handoff document.
            state.phase = Phase.WRITING
            state.work_text = state.take_text()
            state.asked_at = time.time()
            await state.prompt(client, write_prompt(doc_path(self.notes_dir, result.step)))
            return False
        if state.phase is Phase.WRITING and not msg.is_error:
            got.text = state.work_text
            got.handoff_doc = keep_reply(
                self.notes_dir, result.step, state.last_reply(), prompt, got, state.asked_at
            )
            return True
        if state.background.pending and not msg.is_error:
            return False  # a background subagent will wake the main thread again
        state.final = msg
        return True

    def _stderr_hint(self) -> str:
        tail = [line.strip() for line in self._stderr_tail if line.strip()]
        return f" (CLI stderr: {' | '.join(tail[-3:])})" if tail else ""

    async def _note_session(self, result: StepResult, sid: str, on_event: EventHook | None) -> None:
        if not sid or sid == result.session_id:
            return
        if result.session_id:
            result.retired.append(result.session_id)
        result.session_id = sid
        # Invariant 1: hand the id over the moment it is known.
        if self.on_session is not None:
            try:
                self.on_session(result.step, sid)
            except Exception:  # noqa: BLE001 — lineage bookkeeping must never kill a step
                pass
        await emit(on_event, SessionKnown(session_id=sid))

    # -- interrupts and rescue ------------------------------------------------------------
    @property
    def interrupting(self) -> bool:
        """True from `interrupt()` until the session has been sent its follow-up."""
        return self._interrupts.interrupting

    def interrupt(self, message: str | Callable[[], Any] = "") -> bool:
        """Stop the running turn at the next message boundary, then continue the same session.

        `message` is what to continue with: a string, or a callable (sync, run in a daemon
        thread; or async) asked once the turn has stopped, e.g. to let a person type a word.
        Empty means the neutral `Resilience.resume_prompt`. Thread-safe and signal-safe: it
        only schedules work on the runtime's loop. Returns False when no step is running.
        """
        return self._interrupts.request(message, self._inflight.client, self._inflight.loop)

    def rescue(self, error: str = "killed-by-signal") -> None:
        """Write the in-flight step to the manifest before the process dies.

        Also stops the step's CLI process, which would otherwise finish its turn as an orphan.
        """
        rescued = self._inflight.rescue(error)
        self.results.extend(rescued)
        if rescued:
            try:
                self.manifest.write([r.to_row(self.run_id) for r in self.results])
            except Exception:  # noqa: BLE001 — called from a signal handler on the way out
                pass

    def abandon(self) -> None:
        """Give up the in-flight step without recording it (second Ctrl-C): stop its CLI."""
        self._inflight.abandon()

    def close(self) -> None:
        self.sessions.close()


def _absorb(result: StepResult, got: Attempt) -> None:
    """One attempt's yield added to the step's result."""
    result.cost_usd = round(result.cost_usd + got.cost_usd, 6)
    result.num_turns += got.num_turns
    result.tool_calls.extend(got.tool_calls)
    if got.text:
        result.text = got.text
    if got.context:
        result.context = got.context
    if got.model:
        result.model = got.model
    if got.handoff_doc is not None:
        return  # neither a success nor a failure: the successor decides
    result.ok = got.ok
    result.error = None if got.ok else (got.error or "unknown error")
    result.api_error_status = None if got.ok else got.api_error_status


def _result_error_text(exc: ResultError) -> str:
    data = getattr(exc, "data", None) or {}
    text = data.get("result") if isinstance(data, dict) else None
    errors = getattr(exc, "errors", None) or []
    return str(text or "; ".join(map(str, errors)) or exc)
