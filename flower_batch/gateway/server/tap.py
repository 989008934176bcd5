"""The gateway's tap: budgets, metering and recording around any mode's responder.

    MessagesServer(JobRouter(Tap(mode_responder, ...), secret))

For each request of a job: refuse it if a budget is spent, else ask the mode's responder
(scripted, proxy or replay), then watch the answer go by — SSE events one at a time, as the
core sends them (nothing is buffered), so the meter sees message_start's usage before the rest
of the stream is even read. The exchange is written to the job's recording when it ends,
however it ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from flower.scripted import ParsedRequest, Responder, ResponsePlan, SSEEvent
from flower_batch.gateway.budget import Budgets
from flower_batch.gateway.metering import JobMeter, MeterSummary, usage_fields
from flower_batch.gateway.recording import Recorder, request_summary
from flower_batch.gateway.server.routing import job_of
from flower_batch.jobmodel.modes import GatewayMode

REFUSAL_STATUS = 402  # billing_error: the CLI does not retry it; flower's resilience calls it fatal


def refusal_plan(reason: str) -> ResponsePlan:
    """The budget's refusal, shaped like an Anthropic error (see budget.py)."""
    body = {"type": "error", "error": {"type": "billing_error", "message": reason}}
    return ResponsePlan.json(
        body, status=REFUSAL_STATUS, headers={"x-should-retry": "false"}, rule="gateway:budget"
    )


OVERLOADED_STATUS = 529  # retried by the CLI, then waited out by flower's resilience (same session)


def cannot_meter_plan(reason: str) -> ResponsePlan:
    """A request the gateway could not meter, refused as a transient overload: nothing was sent on."""
    body = {"type": "error", "error": {"type": "overloaded_error", "message": reason}}
    return ResponsePlan.json(
        body, status=OVERLOADED_STATUS, headers={"x-should-retry": "true"}, rule="gateway:cannot-meter"
    )


_BUDGET_KEY = "tap:budget"
_NO_ROOM_KEY = "tap:no-room"


class _BudgetDecision:
    """The budget's word on one request, taken in begin() and kept to by respond()."""

    def __init__(self, reason: str | None) -> None:
        self.reason = reason


class Tap:
    """A Responder wrapping another; see the module docstring."""

    def __init__(
        self, inner: Responder, *, batch_dir: Path, mode: GatewayMode, budgets: Budgets | None = None
    ) -> None:
        self.inner = inner
        self.batch_dir = Path(batch_dir)
        self.mode = mode
        self.budgets = budgets
        self.recorder = Recorder(self.batch_dir, source=mode)
        self._meters: dict[str, JobMeter] = {}
        self._lock = threading.Lock()

    def meter(self, job: str) -> JobMeter:
        with self._lock:
            if job not in self._meters:
                self._meters[job] = JobMeter(
                    self.batch_dir / job / "logs", job, self.mode, free=self.mode.rules.replays
                )
            return self._meters[job]

    def summaries(self) -> Mapping[str, MeterSummary]:
        with self._lock:
            return _Summaries(dict(self._meters))

    def begin(self, request: ParsedRequest, body: Iterable[bytes] | None = None) -> None:
        """Before the body is parsed: the budget's decision (it needs only the job), then the
        mode's own begin (the proxy forwards the raw request at once) if the job may spend."""
        job = job_of(request.prefix)
        begin = getattr(self.inner, "begin", None)
        if job is None or begin is None:
            return
        if request.endpoint == "messages":
            request.begun[_NO_ROOM_KEY] = full = self.meter(job).room_to_meter()
            if full is not None:
                return
        if request.endpoint == "messages" and self.budgets is not None:
            reason = self.budgets.refusal(job, self.summaries())
            request.begun[_BUDGET_KEY] = _BudgetDecision(reason)
            if reason is not None:
                return
        begin(request, body)

    def respond(self, request: ParsedRequest) -> ResponsePlan:
        job = job_of(request.prefix)
        if job is None:  # the router answers these; nothing to meter
            return self.inner.respond(request)
        started = time.time()
        meter = self.meter(job)
        if request.endpoint == "messages":
            # begin() looked already (and then sent nothing on): that decision stands
            looked = _NO_ROOM_KEY in request.begun
            full = request.begun.pop(_NO_ROOM_KEY) if looked else meter.room_to_meter()
            if full is not None:
                return cannot_meter_plan(str(full))  # nothing written: there is no room to
        if request.endpoint == "messages" and self.budgets is not None:
            early = request.begun.pop(_BUDGET_KEY, None)
            # begin() decided already (and forwarded the request if allowed): that decision stands
            reason = (
                early.reason
                if isinstance(early, _BudgetDecision)
                else self.budgets.refusal(job, self.summaries())
            )
            if reason is not None:
                meter.refused(reason)
                plan = refusal_plan(reason)
                self.recorder.append(
                    job,
                    request=request_summary(request),
                    endpoint=request.endpoint,
                    status=plan.status,
                    outcome="refused",
                    json_body=plan.json_body,
                    headers=plan.headers,
                    started=started,
                    source="gateway",
                )
                return plan
        plan = self.inner.respond(request)
        watch = _Watch(self, job, meter, request, plan, started)
        if plan.events is not None:
            plan.events = watch.stream(plan.events, plan.cut_after)
        else:
            watch.whole(plan)
        plan.after.append(watch.answered)  # the recording and meter.json: after the answer
        return plan


class _Summaries(Mapping[str, MeterSummary]):
    """This gateway's jobs' meter summaries, each made when it is read: a request needs its own
    job's, and every job's only when the batch has a budget (summing them all for each request
    made the gateway's CPU per request grow with the number of jobs)."""

    def __init__(self, meters: dict[str, JobMeter]) -> None:
        self._meters = meters

    def __getitem__(self, job: str) -> MeterSummary:
        return self._meters[job].summary()

    def __iter__(self) -> Iterator[str]:
        return iter(self._meters)

    def __len__(self) -> int:
        return len(self._meters)


class _Watch:
    """One exchange on its way through the tap.

    It must not hold the plan: the plan holds the stream generator, whose frame holds this
    watch, and that cycle would delay the generator's close (and so the record of a job that
    went away mid-stream) until the cyclic garbage collector happens to run.
    """

    def __init__(
        self,
        tap: Tap,
        job: str,
        meter: JobMeter,
        request: ParsedRequest,
        plan: ResponsePlan,
        started: float,
    ) -> None:
        self.tap = tap
        self.job = job
        self.meter = meter
        self.endpoint = request.endpoint
        self.requested = request.model
        # The request's summary walks its whole history. A proxied request's body is parsed only
        # after its answer (proxy.py), so its summary waits for answered() too, off the job's
        # wait. A request parsed already (scripted, replay) is summed up now, so the watch never
        # holds its parsed body while it streams.
        deferred = request.unparsed
        self._request: ParsedRequest | None = request if deferred else None
        self.summary: dict[str, Any] = {} if deferred else request_summary(request)
        self.status = plan.status or 200 if plan.events is not None else plan.status
        self.headers = dict(plan.headers)
        self.started = started
        self.model = request.model
        self.ex = meter.new_exchange()
        # The record waits for the core's after-answer call (off the client's wait), unless the
        # answer is still going when that comes (a slow stream): then it is written at its end.
        self._lock = threading.Lock()
        self._after_ran = False
        self._pending: tuple[str, list[Any] | None, Any] | None = None

    def answered(self) -> None:
        """The core's after-answer call: write what the exchange left pending."""
        request, self._request = self._request, None
        summary = request_summary(request) if request is not None else self.summary
        with self._lock:
            self.summary = summary
            self._after_ran = True
            pending, self._pending = self._pending, None
        self.meter.write_summary()
        if pending is not None:
            self._write(*pending)

    def whole(self, plan: ResponsePlan) -> None:
        """A JSON answer, an error, a dropped connection or an outage: meter and record at once."""
        body = plan.json_body
        if (
            plan.status == 200
            and self.endpoint == "messages"
            and isinstance(body, dict)
            and isinstance(body.get("usage"), dict)
        ):
            model = str(body.get("model") or self.model)
            self.meter.update(
                self.ex,
                model,
                usage_fields(body["usage"]),
                final=True,
                requested=self.requested,
                summary=False,
            )
        self._record(plan.outcome, events=None, json_body=body)

    def stream(self, events: Iterable[SSEEvent], cut_after: int | None) -> Iterator[SSEEvent]:
        seen: list[list[Any]] = []
        outcome = "stream"
        try:
            for event in events:
                if cut_after is not None and len(seen) >= cut_after:
                    break  # the core would stop here too; stopping here keeps the record exact
                self._observe(event)
                seen.append([event[0], event[1]])
                yield event
            if cut_after is not None:
                outcome = "cut"
        except GeneratorExit:
            outcome = "client-gone"  # the core stopped pulling: the job's connection went away
            raise
        except OSError:
            outcome = "upstream-cut"
            raise
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()  # e.g. the proxy's upstream connection, when the stream stopped early
            self._record(outcome, events=seen, json_body=None)

    def _observe(self, event: SSEEvent) -> None:
        name, data = event
        if not isinstance(data, dict):
            return
        if name == "message_start" and isinstance(data.get("message"), dict):
            message = data["message"]
            self.model = str(message.get("model") or self.model)
            usage = message.get("usage")
            if isinstance(usage, dict):
                self.meter.update(
                    self.ex,
                    self.model,
                    usage_fields(usage),
                    final=False,
                    requested=self.requested,
                    summary=False,
                )
        elif name == "message_delta" and isinstance(data.get("usage"), dict):
            self.meter.update(
                self.ex,
                self.model,
                usage_fields(data["usage"]),
                final=True,
                requested=self.requested,
                summary=False,
            )

    def _record(self, outcome: str, *, events: list[Any] | None, json_body: Any) -> None:
        with self._lock:
            if not self._after_ran:
                self._pending = (outcome, events, json_body)
                return
        self.meter.write_summary()
        self._write(outcome, events, json_body)

    def _write(self, outcome: str, events: list[Any] | None, json_body: Any) -> None:
        try:
            self.tap.recorder.append(
                self.job,
                request=self.summary,
                endpoint=self.endpoint,
                status=self.status or 0,
                outcome=outcome,
                events=events,
                json_body=json_body,
                headers=self.headers,
                started=self.started,
                source=self.tap.mode,
            )
        except OSError:
            pass  # a full disk must not take the job's answer down with it; the meter is already written
