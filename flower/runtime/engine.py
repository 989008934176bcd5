"""Runtime: one `run()` = one step = one session of the real Claude Code CLI.

The runtime owns the run directory (sessions.db, manifest.json, the CLI's config dir), turns
whatever the CLI does — success, API errors, crashes, interrupts — into a StepResult, and
resumes the same session across infrastructure failures.

Context economy lives here too: the spill hook (`spill_hook`), trim on load (the
PruningSessionStore's Trimmer) and handoff (`flower.context.handoff`): past the threshold the turn is
interrupted, the session writes its handoff document and a fresh successor takes over inside
the same `run()`; `StepResult.retired` lists the sessions it replaced.

Limits (`flower.runtime.limits`) too: each session starts with the time and budget left in
front of its prompt, a PostToolUse hook passes on the notices as shares are used, and at the
deadline the turn is interrupted and the session writes its notes (收尾-<step>.md) within the
wrap-up window; the step then ends as timed out, its session kept for the next wake.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookCallback,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    ProcessError,
    ResultError,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolUseBlock,
    project_key_for_directory,
)

from flower.catalogue.context import DEGRADED_DOC, HANDOFF_OWN_REPLY, HANDOFF_REQUIRED
from flower.catalogue.names import MANIFEST_FILE, SESSIONS_DB, WRAP_UP_FILE
from flower.catalogue.runtime import WRAP_UP_DEGRADED_DOC
from flower.clock import now_iso
from flower.context.handoff import (
    Handoff,
    degraded_doc,
    doc_path,
    is_overflow,
    missing_sections,
    normalise,
    seed_prompt,
    write_prompt,
)
from flower.context.handoff import save as save_doc
from flower.context.store import SQLiteSessionStore, context_tokens
from flower.context.trim import spill
from flower.context.workbench import notes_dir
from flower.errors import ConfigError, WorkspaceError
from flower.events import (
    AssistantText,
    ContextWarning,
    Event,
    HandedOver,
    HandoffDegraded,
    HandoffDue,
    Interrupted,
    LimitsTold,
    Offline,
    Retried,
    SessionKnown,
    TimeUp,
    ToolCalled,
)
from flower.exitinfo import STAMP_ENV
from flower.protocols import EventSink, SessionHook, WorkbenchLike
from flower.result import StepResult
from flower.runtime.attempt import Attempt, AttemptState, Phase, conclude
from flower.runtime.interrupts import Interrupts, safe_interrupt
from flower.runtime.limits import Limits, LimitWatch
from flower.runtime.manifest import Manifest, new_run_id
from flower.runtime.resilience import Resilience, classify_result, endpoint, model_socket_of, reachable
from flower.runtime.signals import bundled_cli, shielded_cli
from flower.runtime.turns import answers, send
from flower.spec import AgentSpec, tool_base

log = logging.getLogger(__name__)

INTERRUPTED = "interrupted-by-human"
HANDOFF_DUE = "context-full-handoff"
SYNTHETIC_MODEL = "<synthetic>"
REMINDER_OPEN, REMINDER_CLOSE = "<system-reminder>", "</system-reminder>"
HARD_STOP_S = 10.0  # after the wrap-up window, how long an interrupted turn may take to stop

EventHook = EventSink  # (kind, payload); the name Runtime's callers know


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
        self.portable = portable
        self.trim = trim
        self.ephemeral = ephemeral
        self.keep_denials = keep_denials
        self.spill_threshold = spill_threshold
        self.env = dict(env or {})
        self.environ = dict(environ or {})
        self.run_stamp = self.environ.get(STAMP_ENV) or None
        self.cli_path = cli_path
        self.shield_cli = shield_cli
        self.project_key = project_key_for_directory(str(self.workspace))
        # Reported when a step cannot continue: its session was lost with the whole store.
        self.store_was_new = not (self.run_dir / SESSIONS_DB).is_file()
        self.sqlite = SQLiteSessionStore(self.run_dir / SESSIONS_DB)
        self.store: Any = self._wrap_store(self.sqlite)
        self.resilience = Resilience.from_value(resilience)
        self.handoff = Handoff.from_value(handoff)
        self.workbench = workbench
        self.run_id = new_run_id()
        self.manifest = Manifest(self.run_dir / MANIFEST_FILE, self.run_id)
        self.results: list[StepResult] = []
        self.on_session: SessionHook | None = None
        self._inflight: list[StepResult] = []  # a gate's judge may run inside a step's run
        self._rescued: set[int] = set()
        self._client: ClaudeSDKClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._interrupts = Interrupts()
        self._stderr_tail: deque[str] = deque(maxlen=20)
        self._launcher: str | None = None
        self.limits = limits or Limits()
        self._watch = LimitWatch(self.limits)
        self._spent_here = 0.0  # what the CLI reported as spent in this process, turn by turn

    # -- construction helpers -------------------------------------------------------------
    def _wrap_store(self, sqlite: SQLiteSessionStore) -> Any:
        from flower.context.pruning import PruningSessionStore

        trimmer = None
        if self.trim:
            from flower.context.trim import Trimmer

            trimmer = Trimmer(self.run_dir / "trimmed")
        # PruningSessionStore.__new__ picks the subclass with the optional methods the inner
        # store has; mypy only sees the abstract base.
        return PruningSessionStore(  # type: ignore[abstract]
            sqlite, ephemeral=self.ephemeral, keep_denials=self.keep_denials, trim=trimmer
        )

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
        return bool(session_id) and self.sqlite.has_session(self.project_key, session_id)

    def context_of(self, session_id: str) -> int | None:
        return self.sqlite.last_context_tokens(self.project_key, session_id)

    def total_cost(self) -> float:
        return round(sum(r.cost_usd for r in self.results), 6)

    # -- the run --------------------------------------------------------------------------
    # long: one step's session lifecycle (attempts, resume, handoff, the result) read top to bottom
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
        name = step_name or spec.name
        result = StepResult(step=name, resumed=bool(resume))
        self._inflight.append(result)
        policy = self.resilience
        session, send, forking, at = resume, prompt, fork, resume_at
        attempt = 1  # attempts in the resilience sense: a handoff successor is not one
        generations = 0
        try:
            while True:
                may_hand_off = self.handoff.enabled and generations < self.handoff.max_generations
                got = await self._attempt(spec, send, result, session, forking, at, on_event, may_hand_off)
                # A successor that overflows before its first answer would only hand over again.
                progressed = generations == 0 or got.context > 0
                if (
                    got.handoff_doc is None
                    and not got.ok
                    and may_hand_off
                    and result.session_id
                    and progressed
                ):
                    if is_overflow(got.error, got.terminal_reason):
                        # The session can no longer take any request: write the document for it.
                        got.handoff_doc = self._degraded_handoff(result, prompt, got)
                        await self._emit(on_event, HandoffDegraded(error=got.error))
                self._absorb(result, got)
                if got.timed_out:
                    result.errors.append(got.error or "timeout")
                    break  # the deadline is not an infrastructure failure: no retry
                if got.handoff_doc is not None:
                    generations += 1
                    await self._emit(
                        on_event,
                        HandedOver(
                            doc=str(got.handoff_doc), retiring=result.session_id, generation=generations
                        ),
                    )
                    doc = got.handoff_doc.read_text(encoding="utf-8")
                    session, send, forking, at = None, seed_prompt(got.handoff_doc, doc, prompt), False, None
                    continue
                if got.ok:
                    break
                result.errors.append(got.error or "unknown error")
                kind = (
                    "fatal"
                    if got.internal
                    else classify_result(got.error or "", got.api_error_status, got.terminal_reason)
                )
                if not policy.should_retry(kind, attempt):
                    break
                await self._emit(on_event, Retried(attempt=attempt, error_kind=kind, error=got.error))
                if not await self._pause(attempt, spec, on_event):
                    result.errors.append(f"offline for more than {policy.max_offline_wait:.0f} s; gave up")
                    break
                attempt += 1
                if result.session_id:
                    # Continue the interrupted conversation rather than start over.
                    session, send, forking, at = result.session_id, policy.resume_prompt, False, None
                    result.resumed = True
        except Exception as exc:  # noqa: BLE001 — bookkeeping failed; the row must still be written
            result.ok = False
            result.error = f"internal error: {type(exc).__name__}: {exc}"
            result.errors.append(result.error)
        finally:
            result.attempts = attempt
            result.ended_at = now_iso("milliseconds")
            self._interrupts.clear()
            self._inflight = [r for r in self._inflight if r is not result]
        if id(result) not in self._rescued:  # rescue() already wrote it
            self._record(result)
        return result

    def cli_environment(self, spec: AgentSpec) -> dict[str, str]:
        """The environment the CLI runs in for `spec`: the process's, then the runtime's, then the spec's."""
        return {**self.environ, **self.env, **spec.env}

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
        await self._emit(on_event, Offline(host=host, port=port, via=model_socket_of(env)))
        return await policy.wait_online(env=env)

    @staticmethod
    def _absorb(result: StepResult, got: Attempt) -> None:
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

    def _record(self, result: StepResult) -> None:
        self.results.append(result)
        self.manifest.write([r.to_row(self.run_id) for r in self.results])

    # -- handoff --------------------------------------------------------------------------
    def _degraded_handoff(
        self,
        result: StepResult,
        task: str,
        got: Attempt,
        path: Path | None = None,
        template: str = DEGRADED_DOC,
    ) -> Path:
        path = path or doc_path(self.notes_dir, result.step)
        try:
            previous = path.read_text(encoding="utf-8")
        except OSError:
            previous = ""
        text = degraded_doc(
            step=result.step,
            task=task,
            last_text=got.text or result.text,
            tool_calls=result.tool_calls + got.tool_calls,
            error=got.error or "",
            previous=previous,
            template=template,
        )
        return save_doc(path, text)

    def _save_handoff(
        self,
        step: str,
        reply: str,
        task: str,
        got: Attempt,
        asked_at: float,
        path: Path | None = None,
        template: str = DEGRADED_DOC,
    ) -> Path:
        path = path or doc_path(self.notes_dir, step)
        if reply.strip() and not missing_sections(reply):
            return save_doc(path, normalise(reply, step))
        try:  # a session with Write may have written the file itself and replied "done"
            if path.stat().st_mtime >= asked_at - 1 and not missing_sections(
                path.read_text(encoding="utf-8")
            ):
                return path
        except (OSError, UnicodeDecodeError):
            pass
        # The session answered, but not with a usable document: keep what it said under 现场.
        text = degraded_doc(
            step=step,
            task=task,
            last_text=got.text,
            tool_calls=got.tool_calls,
            error=f"the session's handoff reply lacked {'/'.join(HANDOFF_REQUIRED)}",
            template=template,
        )
        return save_doc(path, text + HANDOFF_OWN_REPLY + reply.strip() + "\n")

    # -- one CLI process --------------------------------------------------------------------
    def _options(
        self, spec: AgentSpec, resume: str | None, fork: bool, resume_at: str | None
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
            hooks=self._hooks(spec),
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

    def _hooks(self, spec: AgentSpec) -> dict[str, Any] | None:
        root = self.workbench_dir
        spill = root is not None and spec.workbench and self.spill_threshold > 0
        notices = self.limits.notices and self.limits.active and bool(self.limits.thresholds)
        if not spill and not notices:
            return spec.hooks
        hooks = {event: list(matchers) for event, matchers in (spec.hooks or {}).items()}
        if spill:
            assert root is not None
            hooks.setdefault("PostToolUse", []).append(
                HookMatcher(matcher=None, hooks=[spill_hook(root, self.spill_threshold)])
            )
        if notices:
            hooks.setdefault("PostToolUse", []).append(HookMatcher(matcher=None, hooks=[self.limit_hook()]))
        return hooks

    async def _attempt(
        self,
        spec: AgentSpec,
        prompt: str,
        result: StepResult,
        resume: str | None,
        fork: bool,
        resume_at: str | None,
        on_event: EventHook | None,
        may_hand_off: bool = False,
    ) -> Attempt:
        """One CLI process: send the prompt, read messages until the state machine is done."""
        state = AttemptState()
        self._stderr_tail.clear()
        if self.limits.past_deadline(time.time()):
            state.got.timed_out = True  # no session starts after the deadline
            return conclude(state)
        opening = await self._opening(result.step, resume, on_event)
        try:
            async with ClaudeSDKClient(self._options(spec, resume, fork, resume_at)) as client:
                self._client, self._loop = client, asyncio.get_running_loop()
                with anyio.CancelScope() as reading:
                    timer = asyncio.ensure_future(self._deadline(state, client, reading))
                    try:
                        await self._send(client, state, opening + prompt)
                        async for msg in client.receive_messages():
                            await self._note_session(result, _session_of(msg), on_event)
                            state.background.note(msg)
                            if isinstance(msg, AssistantMessage):
                                await self._on_assistant(msg, state, client, on_event, may_hand_off)
                            elif isinstance(msg, ResultMessage) and await self._on_result(
                                msg, state, client, result, prompt, on_event
                            ):
                                break
                    finally:
                        timer.cancel()
                if reading.cancelled_caught:  # the wrap-up window passed and the turn never stopped
                    self._stopped_at_deadline(state, result, prompt)
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
            self._client = None
        return conclude(state)

    # -- limits: what the agent is told, and the deadline ------------------------------------
    async def _opening(self, step: str, resume: str | None, on_event: EventHook | None) -> str:
        """The limits in front of a session's first prompt ("" when none); on a resume, where
        the notes are that the step wrote when its time was up last time."""
        notes = doc_path(self.notes_dir, step, WRAP_UP_FILE)
        text = self._watch.opening(
            time.time(), self._spent_here, notes if resume and notes.is_file() else None
        )
        if not text:
            return ""
        await self._emit(on_event, LimitsTold(text=text))
        # As a system reminder, the way the CLI adds its own context: the words the agent reads,
        # yet not the workflow's prompt (a replay compares prompts; the time left never repeats).
        return f"{REMINDER_OPEN}\n{text}\n{REMINDER_CLOSE}\n\n"

    async def _deadline(
        self, state: AttemptState, client: ClaudeSDKClient, reading: anyio.CancelScope
    ) -> None:
        """At the deadline, interrupt the turn (TIME_UP); at the end of the wrap-up window,
        interrupt again; if even that turn does not stop, stop reading (the CLI is then closed)."""
        lim = self.limits
        if lim.deadline is None:
            return
        await anyio.sleep(max(0.0, lim.deadline - time.time()))
        if state.phase in (Phase.WORK, Phase.DUE):  # time comes before a pending handoff
            state.phase = Phase.TIME_UP
            await safe_interrupt(client)
        await anyio.sleep(max(0.0, (lim.wrap_up_end() or 0.0) - time.time()))
        state.wrap_expired = True
        await safe_interrupt(client)
        await anyio.sleep(HARD_STOP_S)
        reading.cancel()

    async def _time_up(
        self,
        msg: ResultMessage,
        state: AttemptState,
        client: ClaudeSDKClient,
        result: StepResult,
        on_event: EventHook | None,
    ) -> bool:
        """A turn ended after the deadline (Phase.TIME_UP). True when the attempt is done."""
        aborted = (msg.terminal_reason or "").startswith("aborted")
        if not aborted:
            state.final = msg  # the turn ended on its own as the time ran out: its result stands
            return True
        if state.wrap_expired or self.limits.wrap_up_s <= 0:
            state.got.timed_out = True
            return True
        state.phase = Phase.WRAPPING
        state.work_text = state.take_text()
        state.asked_at = time.time()
        notes = doc_path(self.notes_dir, result.step, WRAP_UP_FILE)
        await self._emit(on_event, TimeUp(notes=str(notes), wrap_up_s=self.limits.wrap_up_s))
        await self._send(client, state, self._watch.time_up(time.time(), notes))
        return False

    def _wrapped(self, state: AttemptState, result: StepResult, task: str, reply: str) -> None:
        """The notes' turn ended (or the window did): keep them, end the attempt as timed out."""
        got = state.got
        got.timed_out = True
        path = doc_path(self.notes_dir, result.step, WRAP_UP_FILE)
        template = WRAP_UP_DEGRADED_DOC  # if the runtime must write them: notes, not a handoff
        if reply.strip():
            got.notes_doc = self._save_handoff(
                result.step, reply, task, got, state.asked_at, path=path, template=template
            )
        else:
            got.notes_doc = self._degraded_handoff(result, task, got, path=path, template=template)

    def _stopped_at_deadline(self, state: AttemptState, result: StepResult, task: str) -> None:
        """Reading was stopped after the wrap-up window: the runtime writes the notes itself."""
        got = state.got
        if got.timed_out:
            return
        got.error = got.error or "the turn did not stop at the deadline"
        self._wrapped(state, result, task, "")

    def limit_hook(self) -> HookCallback:
        """A PostToolUse hook: the notices of shares crossed since the last tool call, as
        additional context (the CLI puts it into its next request to the model). Only the main
        thread's tools: the session that plans the work is the one to tell (a coordinator
        hears it when its Agent call returns)."""

        async def hook(
            input_data: HookInput, tool_use_id: str | None, context: HookContext
        ) -> HookJSONOutput:
            if input_data.get("agent_id"):
                return {}  # a subagent's tool: the notice waits for the main thread's next one
            text = self._watch.check(time.time(), self._spent_here)
            if not text:
                return {}
            return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": text}}

        return hook

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
            await self._watch_context(state, client, on_event, may_hand_off)
        for block in msg.content:
            if isinstance(block, TextBlock) and block.text:
                state.add_text(msg.message_id or str(id(msg)), block.text)
                await self._emit(on_event, AssistantText(text=block.text))
            elif isinstance(block, ToolUseBlock):
                got.tool_calls.append({"name": block.name, "input": compact_input(block.input)})
                await self._emit(on_event, ToolCalled(name=block.name, input=block.input))

    async def _watch_context(
        self, state: AttemptState, client: ClaudeSDKClient, on_event: EventHook | None, may_hand_off: bool
    ) -> None:
        """WORK -> DUE when the context is full (interrupt sent); a warning once before that."""
        context = state.got.context
        if state.phase is Phase.WORK and may_hand_off and self.handoff.due(context):
            state.phase = Phase.DUE
            await self._emit(on_event, HandoffDue(context=context, at=self.handoff.at))
            await safe_interrupt(client)
        elif not state.warned and self.handoff.enabled and context >= self.handoff.warn_at:
            state.warned = True
            await self._emit(on_event, ContextWarning(context=context, at=self.handoff.at))

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
        self._spent_here += msg.total_cost_usd or 0.0
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
            await self._emit(on_event, Interrupted(message=follow_up))
            await self._send(client, state, follow_up)
            self._interrupts.sent()
            return False
        if state.phase is Phase.TIME_UP:
            return await self._time_up(msg, state, client, result, on_event)
        if state.phase is Phase.WRAPPING:
            reply = (
                "".join(state.texts[state.last_text_id]) if state.last_text_id and not msg.is_error else ""
            )
            self._wrapped(state, result, prompt, reply)
            return True
        if state.phase is Phase.DUE and aborted:
            # Our own interrupt landed: ask the full session for its handoff document.
            state.phase = Phase.WRITING
            state.work_text = state.take_text()
            state.asked_at = time.time()
            await self._send(client, state, write_prompt(doc_path(self.notes_dir, result.step)))
            return False
        if state.phase is Phase.WRITING and not msg.is_error:
            reply = "".join(state.texts[state.last_text_id]) if state.last_text_id else ""
            got.text = state.work_text
            got.handoff_doc = self._save_handoff(result.step, reply, prompt, got, state.asked_at)
            return True
        if state.background.pending and not msg.is_error:
            return False  # a background subagent will wake the main thread again
        state.final = msg
        return True

    @staticmethod
    async def _send(client: ClaudeSDKClient, state: AttemptState, text: str) -> None:
        """Send a prompt; its turn's result is the next one that counts (flower.runtime.turns)."""
        state.sent, state.answered = await send(client, text), False

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
        await self._emit(on_event, SessionKnown(session_id=sid))

    @staticmethod
    async def _emit(on_event: EventHook | None, event: Event) -> None:
        """Tell the caller's hook; a failing hook (a display, say) never fails the step."""
        if on_event is None:
            return
        kind = event.kind
        try:
            out = on_event(kind, event.payload())
            if isinstance(out, Awaitable):
                await out
        except Exception as exc:  # noqa: BLE001
            log.warning("on_event hook failed on %s: %s: %s", kind, type(exc).__name__, exc)

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
        return self._interrupts.request(message, self._client, self._loop)

    def rescue(self, error: str = "killed-by-signal") -> None:
        """Write the in-flight step to the manifest before the process dies.

        Also stops the step's CLI process, which would otherwise finish its turn as an orphan.
        """
        inflight, self._inflight = list(self._inflight), []
        self._kill_cli()
        for current in inflight:
            self._rescued.add(id(current))
            current.ok = False
            current.error = error
            current.ended_at = now_iso("milliseconds")
            self.results.append(current)
        if inflight:
            try:
                self.manifest.write([r.to_row(self.run_id) for r in self.results])
            except Exception:  # noqa: BLE001 — called from a signal handler on the way out
                pass

    def abandon(self) -> None:
        """Give up the in-flight step without recording it (second Ctrl-C): stop its CLI."""
        self._rescued.update(id(r) for r in self._inflight)
        self._inflight = []
        self._kill_cli()

    def _kill_cli(self) -> None:
        client = self._client
        process = getattr(getattr(client, "_transport", None), "_process", None)
        pid = getattr(process, "pid", None)
        if pid and getattr(process, "returncode", None) is None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        self.sqlite.close()


def spill_hook(root: Path, threshold: int = 4000) -> HookCallback:
    """A PostToolUse hook: string parts of a tool result over `threshold` chars go to
    ``<root>/spill/<sha16>.txt`` and the model sees a pointer plus the first 400 chars.

    CLI 2.1.327 replaces a tool's output with the hook's ``updatedToolOutput`` only when the
    value keeps the tool's output schema (Bash: stdout/stderr/..., Read: file.content ...), so
    the hook swaps string leaves in place and keeps every key. Checked against the real CLI
    for Read and Bash: the tool_result the API receives carries the pointer.
    """

    def replace(value: Any) -> tuple[Any, bool]:
        if isinstance(value, str):
            pointer = spill(value, root, threshold=threshold)
            return (pointer, True) if pointer is not None else (value, False)
        if isinstance(value, dict):
            out, changed = {}, False
            for key, item in value.items():
                out[key], hit = replace(item)
                changed = changed or hit
            return out, changed
        if isinstance(value, list):
            items = [replace(item) for item in value]
            return [v for v, _ in items], any(hit for _, hit in items)
        return value, False

    async def hook(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        try:
            new, changed = replace(input_data.get("tool_response"))
        except OSError:
            return {}  # no room on disk: the model gets the full result, nothing is lost
        if not changed:
            return {}
        return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": new}}

    return hook


def _result_error_text(exc: ResultError) -> str:
    data = getattr(exc, "data", None) or {}
    text = data.get("result") if isinstance(data, dict) else None
    errors = getattr(exc, "errors", None) or []
    return str(text or "; ".join(map(str, errors)) or exc)
