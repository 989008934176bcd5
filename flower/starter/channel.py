"""HumanChannel: the person on the other side, as an in-process MCP server named ``human``.

The agent gets two tools:

* ``mcp__human__ask(question)`` — the question reaches the person and the tool returns the answer.
  When nobody answers (timeout, no terminal, ``timeout_s <= 0`` = fully automatic, the person
  declined, or the question budget ``max_asks`` is spent) the tool result tells the model that
  nobody will answer: decide, record the assumption, carry on. A channel never blocks forever.
* ``mcp__human__inbox()`` — what the person typed meanwhile (``send(text)`` from any thread).

Who answers: ``ask_fn(question, timeout_s) -> str | None`` (sync: run on a daemon thread; or
async). The default prompts on ``/dev/tty``. ``ask_fn=False`` means the channel asks nobody itself:
another component (a CLI's input thread, a UI) sees the ``"ask"`` event and calls ``answer()`` or
``decline()``. Whichever comes first wins; later answers are ignored.

Every exchange is appended to ``log_path`` (markdown, timestamped); typed messages also go to
``amend_path`` (需求.md) under ``## 运行中补充``. All public methods are thread-safe.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from claude_agent_sdk import create_sdk_mcp_server, tool

from flower.catalogue.channel import (
    ANSWERED,
    ASK_DESCRIPTION,
    BUDGET_SPENT,
    DECLINED,
    INBOX_DESCRIPTION,
    INBOX_EMPTY,
    INBOX_HEAD,
    NO_ANSWER,
    QA_ANSWER,
    QA_HEADER,
    QA_INTERJECTION,
    QA_OTHER,
    QA_QUESTION,
    QA_STATUS,
    TTY_QUESTION,
)
from flower.catalogue.starter import RUN_HEADING
from flower.catalogue.terminal import WAIT_MINUTES, WAIT_SECONDS
from flower.events import Answered, Asked
from flower.protocols import EventSink
from flower.starter.brief import append_to_section

SERVER = "human"
ASK_TOOL = f"mcp__{SERVER}__ask"
INBOX_TOOL = f"mcp__{SERVER}__inbox"

AskFn = Callable[[str, float], Any]
EventHook = EventSink

# Exchange.status values
ANSWER, DECLINE, TIMEOUT, AUTO, BUDGET, CANCELLED = (
    "answered",
    "declined",
    "timeout",
    "auto",
    "budget",
    "cancelled",
)
_LOG_STATUS = QA_STATUS


def _now() -> str:
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")


@dataclass
class Exchange:
    """One question and what became of it."""

    index: int
    question: str
    status: str = ""
    answer: str | None = None
    asked_at: str = field(default_factory=_now)
    answered_at: str = ""

    def tool_text(self) -> str:
        """The tool result the model reads."""
        if self.status == ANSWER:
            return ANSWERED.format(answer=self.answer)
        return {DECLINE: DECLINED, BUDGET: BUDGET_SPENT}.get(self.status, NO_ANSWER)

    def markdown(self) -> str:
        label = _LOG_STATUS.get(self.status, self.status)
        if self.status == ANSWER:
            tail = QA_ANSWER.format(answered_at=self.answered_at, answer=self.answer)
        else:
            tail = QA_OTHER.format(label=label, answered_at=self.answered_at)
        return QA_QUESTION.format(index=self.index, asked_at=self.asked_at, question=self.question, tail=tail)


class _Pending:
    def __init__(self, exchange: Exchange, loop: asyncio.AbstractEventLoop) -> None:
        self.exchange = exchange
        self.loop = loop
        self.future: asyncio.Future[tuple[str, str | None]] = loop.create_future()
        self.stop = threading.Event()  # tells a terminal reader to give up
        self.outcome: tuple[str, str | None] | None = (
            None  # the first (status, answer); guarded by the channel lock
        )


class HumanChannel:
    def __init__(
        self,
        *,
        log_path: str | os.PathLike[str],
        timeout_s: float = 1800.0,
        max_asks: int | None = None,
        amend_path: str | os.PathLike[str] | None = None,
        on_event: EventHook | None = None,
        ask_fn: AskFn | None | bool = None,
    ) -> None:
        if max_asks is not None and max_asks < 0:
            max_asks = None  # CLI convention: -1 = unlimited
        self.log_path = Path(log_path)
        self.timeout_s = float(timeout_s)
        self.max_asks = max_asks
        self.amend_path = Path(amend_path) if amend_path is not None else None
        self.on_event = on_event
        self.ask_fn = ask_fn
        self._lock = threading.RLock()
        self._exchanges: list[Exchange] = []
        self._pending: deque[_Pending] = deque()
        self._inbox: list[tuple[str, str]] = []
        self._tool_asks = 0
        self._server: Any = None

    # -- what an AgentSpec needs ----------------------------------------------------------------
    @property
    def tool_names(self) -> list[str]:
        return [ASK_TOOL, INBOX_TOOL]

    def mcp_servers(self) -> dict[str, Any]:
        """``{"human": <in-process MCP server>}`` for ``AgentSpec.mcp_servers``."""
        with self._lock:
            if self._server is None:
                self._server = self._build_server()
            return {SERVER: self._server}

    def _build_server(self) -> Any:
        @tool("ask", ASK_DESCRIPTION, {"question": str})
        async def ask_tool(args: dict[str, Any]) -> dict[str, Any]:
            exchange = await self._tool_ask(str(args.get("question", "")).strip())
            return {"content": [{"type": "text", "text": exchange.tool_text()}]}

        @tool("inbox", INBOX_DESCRIPTION, {})
        async def inbox_tool(args: dict[str, Any]) -> dict[str, Any]:
            return {"content": [{"type": "text", "text": self._inbox_text()}]}

        return create_sdk_mcp_server(SERVER, tools=[ask_tool, inbox_tool])

    # -- asking ----------------------------------------------------------------------------------
    async def ask(self, question: str, *, timeout_s: float | None = None) -> str | None:
        """Ask the person; their answer, or None when nobody answered. Not limited by max_asks
        (that budget is for the agent's questions, not the workflow's own)."""
        exchange = await self._ask(question, self.timeout_s if timeout_s is None else timeout_s)
        return exchange.answer if exchange.status == ANSWER else None

    async def _tool_ask(self, question: str) -> Exchange:
        with self._lock:
            over = self.max_asks is not None and self._tool_asks >= self.max_asks
            self._tool_asks += 1
        if over:
            return await self._done(self._finish(self._open(question), BUDGET, None))
        return await self._ask(question, self.timeout_s)

    def _open(self, question: str) -> Exchange:
        with self._lock:
            exchange = Exchange(index=len(self._exchanges) + 1, question=question)
            self._exchanges.append(exchange)
        return exchange

    async def _ask(self, question: str, timeout_s: float) -> Exchange:
        exchange = self._open(question)
        asked = Asked(question=question, index=exchange.index, timeout_s=timeout_s)
        if not question or timeout_s <= 0:
            await self._emit(asked)
            return await self._done(self._finish(exchange, DECLINE if not question else AUTO, None))
        pending = _Pending(exchange, asyncio.get_running_loop())
        with self._lock:
            self._pending.append(pending)  # before the event: its handler may answer() at once
        helper: asyncio.Task[Any] | None = None
        try:
            await self._emit(asked)
            helper = self._start_asker(pending, timeout_s)
            status, answer = await asyncio.wait_for(asyncio.shield(pending.future), timeout_s)
        except TimeoutError:
            status, answer = self._settle(pending, TIMEOUT, None)
        except asyncio.CancelledError:
            self._finish(exchange, *self._settle(pending, CANCELLED, None))
            raise
        finally:
            pending.stop.set()
            with self._lock:
                if pending in self._pending:
                    self._pending.remove(pending)
            if helper is not None and not helper.done():
                helper.cancel()
        return await self._done(self._finish(exchange, status, answer))

    def _start_asker(self, pending: _Pending, timeout_s: float) -> asyncio.Task[Any] | None:
        fn = self.ask_fn
        question = pending.exchange.question
        if fn is False:
            return None  # answers come through answer()/decline()
        if fn is None or fn is True:
            fn = _terminal_asker(pending.stop)
        if inspect.iscoroutinefunction(fn):

            async def run_async() -> None:
                try:
                    self._from_asker(pending, await fn(question, timeout_s))
                except Exception:  # noqa: BLE001 — a broken asker means "no answer", never a crash
                    self._from_asker(pending, None)

            return asyncio.get_running_loop().create_task(run_async())

        def run_sync() -> None:
            try:
                got = fn(question, timeout_s)
            except Exception:  # noqa: BLE001
                got = None
            self._from_asker(pending, got)

        threading.Thread(target=run_sync, name="flower-human-ask", daemon=True).start()
        return None

    def _from_asker(self, pending: _Pending, got: Any) -> None:
        text = got.strip() if isinstance(got, str) else ""
        # An empty line or None from the asker: the person is not answering this one.
        self._settle(
            pending, ANSWER if text else (DECLINE if isinstance(got, str) else TIMEOUT), text or None
        )

    def _settle(self, pending: _Pending, status: str, answer: str | None) -> tuple[str, str | None]:
        """First outcome wins; returns the outcome that stands. Safe from any thread."""
        with self._lock:
            if pending.outcome is None:
                pending.outcome = (status, answer)
                try:
                    pending.loop.call_soon_threadsafe(_resolve_future, pending.future, pending.outcome)
                except RuntimeError:
                    pass  # the loop is gone (the run ended): the outcome is still recorded
            return pending.outcome

    def _finish(self, exchange: Exchange, status: str, answer: str | None) -> Exchange:
        with self._lock:
            exchange.status, exchange.answer, exchange.answered_at = status, answer, _now()
            self._log(exchange.markdown())
        return exchange

    async def _done(self, exchange: Exchange) -> Exchange:
        await self._emit(
            Answered(
                question=exchange.question,
                index=exchange.index,
                status=exchange.status,
                answer=exchange.answer,
            )
        )
        return exchange

    # -- the person's side (any thread) -------------------------------------------------------
    @property
    def pending(self) -> str | None:
        """The oldest question still waiting for an answer, or None. One answered but not yet
        taken by its asker is not waiting: shown as pending, it got the next answer too."""
        with self._lock:
            return next((p.exchange.question for p in self._pending if p.outcome is None), None)

    def answer(self, text: str) -> bool:
        """Answer the oldest open question. False when no question is waiting."""
        if not (text or "").strip():
            return self.decline()
        return self._answer_oldest(ANSWER, text.strip())

    def decline(self) -> bool:
        """Refuse the oldest open question: the model decides on its own. False if none waits."""
        return self._answer_oldest(DECLINE, None)

    def _answer_oldest(self, status: str, answer: str | None) -> bool:
        with self._lock:
            for pending in self._pending:
                if pending.outcome is None:
                    self._settle(pending, status, answer)
                    return True
        return False

    def deliver(self, text: str) -> str:
        """What a single input line should do: answer the open question, else go to the inbox.
        Returns "answer" or "inbox"."""
        if self.pending is not None and self.answer(text):
            return "answer"
        self.send(text)
        return "inbox"

    def send(self, text: str) -> None:
        """Queue a message for the agent's inbox; also log it and amend the brief."""
        text = (text or "").strip()
        if not text:
            return
        stamp = _now()
        with self._lock:
            self._inbox.append((stamp, text))
            self._log(QA_INTERJECTION.format(stamp=stamp, text=text))
        self.amend(text)

    def amend(self, text: str) -> str | None:
        """Append `text` to the brief (amend_path) under ``## 运行中补充``; None without a brief."""
        if self.amend_path is None or not (text or "").strip():
            return None
        with self._lock:
            try:
                return append_to_section(self.amend_path, RUN_HEADING, text)
            except OSError:
                return None  # the inbox still carries the words; bookkeeping never kills the run

    def inbox(self) -> list[str]:
        """Take the queued messages (oldest first); the queue is empty afterwards."""
        with self._lock:
            taken, self._inbox = self._inbox, []
        return [text for _, text in taken]

    def _inbox_text(self) -> str:
        with self._lock:
            taken, self._inbox = self._inbox, []
        if not taken:
            return INBOX_EMPTY
        return "\n".join([INBOX_HEAD] + [f"- [{stamp}] {text}" for stamp, text in taken])

    # -- records ---------------------------------------------------------------------------------
    @property
    def exchanges(self) -> list[Exchange]:
        with self._lock:
            return list(self._exchanges)

    @property
    def asks_used(self) -> int:
        with self._lock:
            return self._tool_asks

    def transcript(self) -> str:
        """This process's questions and answers as markdown (the log file keeps all processes)."""
        return "\n".join(e.markdown() for e in self.exchanges if e.status)

    def _log(self, block: str) -> None:
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            fresh = not self.log_path.exists() or self.log_path.stat().st_size == 0
            with open(self.log_path, "a", encoding="utf-8") as fh:
                fh.write((QA_HEADER if fresh else "\n") + block)
        except OSError:
            pass  # a log that cannot be written must not stop the agent

    async def _emit(self, event: Asked | Answered) -> None:
        hook = self.on_event
        if hook is None:
            return
        try:
            out = hook(event.kind, event.payload())
            if inspect.isawaitable(out):
                await out
        except Exception:  # noqa: BLE001 — display problems never break a question
            pass


def _resolve_future(future: asyncio.Future[Any], outcome: tuple[str, str | None]) -> None:
    if not future.done():
        future.set_result(outcome)


def _terminal_asker(stop: threading.Event) -> Callable[[str, float], str | None]:
    """Prompt on /dev/tty and read one line, until timeout or `stop`. None when there is no TTY."""

    def ask(question: str, timeout_s: float) -> str | None:
        try:
            fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
        except OSError:
            return None
        try:
            wait = (
                WAIT_MINUTES.format(n=timeout_s / 60) if timeout_s >= 60 else WAIT_SECONDS.format(n=timeout_s)
            )
            os.write(fd, TTY_QUESTION.format(question=question, wait=wait).encode())
            return read_line(fd, time.monotonic() + timeout_s, stop)
        except OSError:
            return None
        finally:
            os.close(fd)

    return ask


def read_line(fd: int, deadline: float, stop: threading.Event) -> str | None:
    buf = b""
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], min(left, 0.2))
        if not ready:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        buf += chunk
        if b"\n" in buf:
            return buf.split(b"\n", 1)[0].decode("utf-8", errors="replace")
    return None
