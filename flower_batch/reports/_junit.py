"""JUnit XML for CI: one <testsuite> per task, one <testcase> per job.

By failure class (jobmodel/classes.py), so CI tells a broken run from a bad result:
agent / verifier / timeout / budget -> <failure type=CLASS message=REASON>
infrastructure                      -> <error type="infrastructure" message=REASON>
skipped, not run yet                -> <skipped message=...> (a skipped job still counts in its class)
paused                              -> <skipped message="paused: REASON">: no verdict yet (a higher
                                       budget continues it); counted apart in the suite's `paused`
                                       property (and `--fail-under` counts it as not passed)
A graded job's reward (Harbor tasks) is in its <system-out> and its failure's details, each
suite's mean reward in its `mean_reward` property. The check's output (and the log tail) go to
<system-out>. Element order and attributes
stay inside the common Jenkins/Ant JUnit schema.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from flower_batch.harbor.shown import fmt_reward
from flower_batch.jobmodel.classes import FailureClass
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.status import Status

from ._results import BatchResults

# Characters XML 1.0 forbids (terminal escapes in logs would make the file unreadable).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NO_VERDICT = (Status.SKIPPED, Status.PAUSED)
_FAILURES = (
    FailureClass.AGENT,
    FailureClass.VERIFIER,
    FailureClass.TIMEOUT,
    FailureClass.BUDGET,
    FailureClass.DISK,
)


def junit_xml(results: BatchResults) -> str:
    jobs_by_task: dict[str, list[JobSpec]] = {}
    for job in results.ordered_jobs:
        jobs_by_task.setdefault(job.task, []).append(job)
    root = ET.Element("testsuites", name=f"flower-batch {results.batch}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    for task, jobs in jobs_by_task.items():
        suite = _suite(results, task, jobs)
        root.append(suite)
        for key in ("tests", "failures", "errors"):
            totals[key] += int(suite.get(key, "0"))
        totals["time"] += float(suite.get("time", "0"))
    for key, value in totals.items():
        root.set(key, f"{value:.3f}" if key == "time" else str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(results: BatchResults, path: Path) -> Path:
    path.write_text(junit_xml(results), encoding="utf-8")
    return path


def _suite(results: BatchResults, task: str, jobs: list[JobSpec]) -> ET.Element:
    outcomes = [results.outcomes.get(job.id) for job in jobs]
    suite = ET.Element(
        "testsuite",
        name=task,
        tests=str(len(jobs)),
        failures=str(
            sum(1 for o in outcomes if o and o.status is not Status.SKIPPED and o.klass in _FAILURES)
        ),
        errors=str(sum(1 for o in outcomes if o and o.klass is FailureClass.INFRASTRUCTURE)),
        skipped=str(sum(1 for o in outcomes if o is None or o.status in _NO_VERDICT)),
        time=f"{sum(o.duration_s or 0.0 for o in outcomes if o):.3f}",
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("batch", results.batch),
        ("image_id", results.image_id or "unknown"),
        ("gateway_mode", ",".join(results.gateway_modes)),
        ("model", results.gateway_label),
        ("paused", str(sum(1 for o in outcomes if o and o.status is Status.PAUSED))),
        *_mean_reward(outcomes),
    ):
        ET.SubElement(properties, "property", name=name, value=_clean(value))
    for job, outcome in zip(jobs, outcomes, strict=True):
        suite.append(_case(job, outcome, results.pending_reason(job.id)))
    return suite


def _case(job: JobSpec, outcome: JobOutcome | None, pending_reason: str | None = None) -> ET.Element:
    case = ET.Element("testcase", classname=job.task, name=job.id)
    case.set("time", f"{(outcome.duration_s or 0.0) if outcome else 0.0:.3f}")
    if outcome is None:
        ET.SubElement(case, "skipped", message=_clean(pending_reason or "not run yet (pending)"))
        return case
    reason = outcome.reason or outcome.status.value
    klass = outcome.klass
    if outcome.status is Status.SKIPPED:
        ET.SubElement(case, "skipped", message=_clean(reason))
    elif outcome.status is Status.PAUSED:
        ET.SubElement(case, "skipped", message=_clean(f"paused: {reason}"))
    elif klass is FailureClass.INFRASTRUCTURE:
        element = ET.SubElement(case, "error", message=_clean(reason), type=klass.value)
        element.text = _clean(_details(job, outcome))
    elif klass in _FAILURES:
        element = ET.SubElement(case, "failure", message=_clean(reason), type=klass.value)
        element.text = _clean(_details(job, outcome))
    out = _system_out(job, outcome)
    if out:
        ET.SubElement(case, "system-out").text = _clean(out)
    return case


def _mean_reward(outcomes: list[JobOutcome | None]) -> list[tuple[str, str]]:
    rewards = [o.reward.value for o in outcomes if o and o.reward]
    return [("mean_reward", fmt_reward(sum(rewards) / len(rewards)))] if rewards else []


def _reward_line(job: JobSpec, outcome: JobOutcome) -> list[str]:
    if outcome.reward is None:
        return []
    threshold = f" (passes at {fmt_reward(job.threshold)})" if job.threshold is not None else ""
    return [f"reward: {fmt_reward(outcome.reward.value)}{threshold}"]


def _details(job: JobSpec, outcome: JobOutcome) -> str:
    lines = [f"status: {outcome.status.value}", f"class: {outcome.klass.value}", *_reward_line(job, outcome)]
    if outcome.workflow_ok is not None:
        lines.append(f"workflow ok: {outcome.workflow_ok}")
    if outcome.check_exit is not None:
        lines.append(f"check exit code: {outcome.check_exit}")
    lines += [
        f"step {s.name}: {'ok' if s.ok else 'failed'}" + (f" ({s.error})" if s.error else "")
        for s in outcome.steps
    ]
    return "\n".join(lines)


def _system_out(job: JobSpec, outcome: JobOutcome) -> str:
    parts = [
        *_reward_line(job, outcome),
        f"cost_usd: {outcome.cost_usd if outcome.cost_usd is not None else 'unknown'}; turns: {outcome.num_turns}; model: {outcome.gateway_mode}",
    ]
    if job.check:
        parts.append(f"$ {job.check}\n{outcome.check_output or ''}".rstrip())
    if outcome.log_tail:
        parts.append(f"--- log tail ---\n{outcome.log_tail}")
    return "\n\n".join(parts)


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", _ANSI.sub("", text))
