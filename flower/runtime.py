"""Runtime: one `run()` = one step = one session of the real Claude Code CLI (R-04, R-05).

The runtime owns the run directory (sessions.db, manifest.json, the CLI's config dir), turns
whatever the CLI does — success, API errors, crashes, interrupts — into a StepResult, and
resumes the same session across infrastructure failures (R-18, R-40..R-43).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ProcessError,
    ResultError,
    ResultMessage,
    SystemMessage,
    TaskNotificationMessage,
    TaskStartedMessage,
    TextBlock,
    ToolUseBlock,
    project_key_for_directory,
)

from .manifest import Manifest, new_run_id
from .resilience import Resilience, classify_result, endpoint, reachable
from .result import StepResult, now_iso
from .spec import AgentSpec
from .store import SQLiteSessionStore

INTERRUPTED = "interrupted-by-human"
HANDOFF_DUE = "context-full-handoff"
SYNTHETIC_MODEL = "<synthetic>"

SessionHook = Callable[[str, str], None]  # (step name, session id)
EventHook = Callable[[str, dict], Any]  # (kind, payload)


@dataclass
class _Attempt:
    """What one CLI process produced; several may make up one StepResult."""

    ok: bool = False
    error: str | None = None
    api_error_status: int | None = None
    terminal_reason: str | None = None
    cost_usd: float = 0.0
    num_turns: int = 0
    text: str = ""
    context: int = 0
    tool_calls: list[dict] = field(default_factory=list)
    model: str = ""


def _tool_base(name: str) -> str:
    """`Bash(git:*)` -> `Bash`: the CLI's --tools flag takes bare tool names."""
    return name.split("(", 1)[0].strip()


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
        workspace: str | os.PathLike = ".",
        run_dir: str | os.PathLike = "runs",
        portable: bool = True,
        trim: bool = False,
        ephemeral: bool = True,
        keep_denials: int = 1,
        workbench: Any = False,
        spill_threshold: int = 4000,
        resilience: Any = True,
        handoff: Any = True,
        env: dict[str, str] | None = None,
        cli_path: str | None = None,
    ) -> None:
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise ValueError(f"workspace {self.workspace} is not a directory: create it or pass -w DIR")
        # run_dir is relative to the current directory, not to the workspace.
        self.run_dir = Path(run_dir).resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.portable = portable
        self.trim = trim
        self.ephemeral = ephemeral
        self.keep_denials = keep_denials
        self.spill_threshold = spill_threshold
        self.env = dict(env or {})
        self.cli_path = cli_path
        self.project_key = project_key_for_directory(str(self.workspace))
        self.sqlite = SQLiteSessionStore(self.run_dir / "sessions.db")
        self.store: Any = self._wrap_store(self.sqlite)
        self.resilience = self._make_resilience(resilience)
        self.handoff = handoff
        self.workbench = workbench
        self.run_id = new_run_id()
        self.manifest = Manifest(self.run_dir / "manifest.json", self.run_id)
        self.results: list[StepResult] = []
        self.on_session: SessionHook | None = None
        self._inflight: StepResult | None = None
        self._client: ClaudeSDKClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._interrupt_lock = threading.Lock()
        self._pending_interrupt: str | None = None

    # -- construction helpers -------------------------------------------------------------
    def _wrap_store(self, sqlite: SQLiteSessionStore) -> Any:
        from .pruning import PruningSessionStore

        trimmer = None
        if self.trim:
            from .trim import Trimmer

            trimmer = Trimmer(self.run_dir / "trimmed")
        return PruningSessionStore(
            sqlite, ephemeral=self.ephemeral, keep_denials=self.keep_denials, trim=trimmer
        )

    @staticmethod
    def _make_resilience(value: Any) -> Resilience:
        return Resilience.from_value(value)

    @property
    def manifest_path(self) -> Path:
        return self.manifest.path

    @property
    def config_dir(self) -> Path:
        return self.run_dir / ".claude"

    # -- queries --------------------------------------------------------------------------
    def has_session(self, session_id: str) -> bool:
        return bool(session_id) and self.sqlite.has_session(self.project_key, session_id)

    def context_of(self, session_id: str) -> int | None:
        return self.sqlite.last_context_tokens(self.project_key, session_id)

    def total_cost(self) -> float:
        return round(sum(r.cost_usd for r in self.results), 6)

    # -- the run --------------------------------------------------------------------------
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
            raise ValueError("fork and resume_at need resume=<session id>")
        name = step_name or spec.name
        result = StepResult(step=name, resumed=bool(resume))
        self._inflight = result
        policy = self.resilience
        session, send, forking, at = resume, prompt, fork, resume_at
        attempt = 0
        try:
            while True:
                attempt += 1
                got = await self._attempt(spec, send, result, session, forking, at, on_event)
                self._absorb(result, got)
                if got.ok:
                    break
                result.errors.append(got.error or "unknown error")
                kind = classify_result(got.error or "", got.api_error_status, got.terminal_reason)
                if not policy.should_retry(kind, attempt):
                    break
                await self._emit(on_event, "retry", {"attempt": attempt, "kind": kind, "error": got.error})
                await self._pause(attempt)
                if result.session_id:
                    # Continue the interrupted conversation rather than start over.
                    session, send, forking, at = result.session_id, policy.resume_prompt, False, None
        finally:
            result.attempts = attempt
            result.ended_at = now_iso()
            self._inflight = None
        self._record(result)
        return result

    async def _pause(self, attempt: int) -> None:
        """Back off; when the endpoint is unreachable, wait for it by probing instead (R-40)."""
        env = {**os.environ, **self.env}
        host, port = endpoint(env)
        if reachable(host, port, timeout=self.resilience.probe_timeout):
            await anyio.sleep(self.resilience.delay(attempt))
        else:
            await self.resilience.wait_online(env=env)

    @staticmethod
    def _absorb(result: StepResult, got: _Attempt) -> None:
        result.cost_usd = round(result.cost_usd + got.cost_usd, 6)
        result.num_turns += got.num_turns
        result.tool_calls.extend(got.tool_calls)
        if got.text:
            result.text = got.text
        if got.context:
            result.context = got.context
        if got.model:
            result.model = got.model
        result.ok = got.ok
        result.error = None if got.ok else (got.error or "unknown error")

    def _record(self, result: StepResult) -> None:
        self.results.append(result)
        self.manifest.write([r.to_row(self.run_id) for r in self.results])

    def _options(
        self, spec: AgentSpec, resume: str | None, fork: bool, resume_at: str | None
    ) -> ClaudeAgentOptions:
        env = {**self.resilience.cli_env(), **self.env, **spec.env}
        if self.portable:
            # The CLI's own files live inside run_dir, so a run directory is self-contained.
            env.setdefault("CLAUDE_CONFIG_DIR", str(self.config_dir))
        tools = [_tool_base(t) for t in spec.allowed_tools if not t.startswith("mcp__")]
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
            hooks=spec.hooks,
            agents=spec.agents,
            session_store=self.store,
            session_store_flush="eager",
            resume=resume,
            fork_session=bool(fork and resume),
            resume_session_at=resume_at,
        )
        if spec.effort:
            kwargs["effort"] = spec.effort
        if self.cli_path:
            kwargs["cli_path"] = self.cli_path
        return ClaudeAgentOptions(**kwargs)

    async def _attempt(
        self,
        spec: AgentSpec,
        prompt: str,
        result: StepResult,
        resume: str | None,
        fork: bool,
        resume_at: str | None,
        on_event: EventHook | None,
    ) -> _Attempt:
        got = _Attempt()
        texts: dict[str, list[str]] = {}
        last_text_id = ""
        synthetic: str | None = None
        background: set[str] = set()
        final: ResultMessage | None = None
        try:
            async with ClaudeSDKClient(self._options(spec, resume, fork, resume_at)) as client:
                self._client, self._loop = client, asyncio.get_running_loop()
                await client.query(prompt)
                async for msg in client.receive_messages():
                    await self._note_session(result, _session_of(msg), on_event)
                    if isinstance(msg, AssistantMessage):
                        if msg.model == SYNTHETIC_MODEL or msg.error:
                            synthetic = "".join(b.text for b in msg.content if isinstance(b, TextBlock))
                            continue
                        got.model = msg.model or got.model
                        if msg.parent_tool_use_id is not None:
                            continue  # subagent speech never becomes the step's text
                        if msg.usage:
                            u = msg.usage
                            got.context = int(
                                (u.get("input_tokens") or 0)
                                + (u.get("cache_read_input_tokens") or 0)
                                + (u.get("cache_creation_input_tokens") or 0)
                            )
                        for block in msg.content:
                            if isinstance(block, TextBlock) and block.text:
                                key = msg.message_id or str(id(msg))
                                texts.setdefault(key, []).append(block.text)
                                last_text_id = key
                                await self._emit(on_event, "text", {"text": block.text})
                            elif isinstance(block, ToolUseBlock):
                                got.tool_calls.append({"name": block.name, "input": block.input})
                                await self._emit(on_event, "tool", {"name": block.name, "input": block.input})
                    elif isinstance(msg, TaskStartedMessage):
                        background.add(msg.task_id)
                    elif isinstance(msg, TaskNotificationMessage):
                        background.discard(msg.task_id)
                    elif isinstance(msg, ResultMessage):
                        got.cost_usd += msg.total_cost_usd or 0.0
                        got.num_turns += msg.num_turns or 0
                        follow_up = self._take_interrupt(msg)
                        if follow_up is not None:
                            # One Ctrl-C: same session, same process, not a failed attempt.
                            await self._emit(on_event, "interrupted", {"message": follow_up})
                            await client.query(follow_up)
                            continue
                        if background and not msg.is_error:
                            continue  # a background subagent will wake the main thread again
                        final = msg
                        break
        except ResultError as exc:
            got.error = _result_error_text(exc)
            got.api_error_status = exc.api_error_status
            got.terminal_reason = exc.terminal_reason
        except (ProcessError, OSError, RuntimeError, ValueError) as exc:
            got.error = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # noqa: BLE001 — a step never raises out of the runtime
            got.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._client = None
        if last_text_id:
            got.text = "".join(texts[last_text_id])
        if final is not None and got.error is None:
            got.api_error_status = final.api_error_status
            got.terminal_reason = final.terminal_reason
            if final.is_error:
                got.error = synthetic or final.result or "; ".join(final.errors or []) or final.subtype
            else:
                got.ok = True
        elif got.error is None:
            got.error = synthetic or "the CLI ended without a result"
        return got

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
        await self._emit(on_event, "session", {"session_id": sid})

    @staticmethod
    async def _emit(on_event: EventHook | None, kind: str, payload: dict) -> None:
        if on_event is None:
            return
        out = on_event(kind, payload)
        if isinstance(out, Awaitable):
            await out

    # -- interrupts and rescue ------------------------------------------------------------
    def interrupt(self, message: str = "") -> bool:
        """Stop the running turn at the next message boundary and continue with `message`.

        Thread-safe and signal-safe: it only schedules work on the runtime's loop.
        Returns False when no step is running.
        """
        client, loop = self._client, self._loop
        if client is None or loop is None:
            return False
        with self._interrupt_lock:
            self._pending_interrupt = message or self.resilience.resume_prompt
        loop.call_soon_threadsafe(lambda: loop.create_task(_safe_interrupt(client)))
        return True

    def _take_interrupt(self, msg: ResultMessage) -> str | None:
        with self._interrupt_lock:
            pending = self._pending_interrupt
            if pending is None:
                return None
            self._pending_interrupt = None
        return pending

    def rescue(self, error: str = "killed-by-signal") -> None:
        """Write the in-flight step to the manifest before the process dies (R-27)."""
        current = self._inflight
        if current is None:
            return
        current.ok = False
        current.error = error
        current.ended_at = now_iso()
        self._inflight = None
        try:
            self._record(current)
        except OSError:
            pass

    def close(self) -> None:
        self.sqlite.close()


async def _safe_interrupt(client: ClaudeSDKClient) -> None:
    try:
        await client.interrupt()
    except Exception:  # noqa: BLE001 — the turn may have ended on its own meanwhile
        pass


def _result_error_text(exc: ResultError) -> str:
    data = getattr(exc, "data", None) or {}
    text = data.get("result") if isinstance(data, dict) else None
    errors = getattr(exc, "errors", None) or []
    return str(text or "; ".join(map(str, errors)) or exc)

