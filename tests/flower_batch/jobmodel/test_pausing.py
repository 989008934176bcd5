"""Budgets that pause (issue 20), the pure parts: `--budget-usd N|+N`, the paused status and its
class, the reason and the history a record keeps, how a batch plans a paused job, how the
reports count it and what exit code follows."""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from flower_batch.jobmodel import fields
from flower_batch.jobmodel.budget import BudgetChange
from flower_batch.jobmodel.classes import (
    EXIT_BELOW_THRESHOLD,
    EXIT_INFRASTRUCTURE,
    EXIT_OK,
    EXIT_PAUSED,
    FailureClass,
    class_from_status,
    count_classes,
    describe_counts,
    exit_code_for,
)
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.pausing import Spend, history_entry, pause_reason, read_history
from flower_batch.jobmodel.record import JobRecord, new_record
from flower_batch.jobmodel.resume import Action, plan_resume
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.status import Status
from flower_batch.jobsfile import load_jobs_file
from flower_batch.reports import BatchResults, junit_xml, summary_line

IMAGE = "sha256:" + "2" * 64


# -- --budget-usd N | +N ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "cap", "spent", "new"),
    [
        ("0.5", 0.05, 0.06, 0.5),  # absolute
        (" 0.25 ", None, 0.0, 0.25),
        ("+0.20", 0.05, 0.052, 0.25),  # added to the cap
        ("+0.1", None, 0.07, 0.17),  # no cap (a batch's budget paused it): added to what it spent
        (0.3, 0.1, 0.1, 0.3),  # a number, as a TOML value or a float option
    ],
)
def test_a_budget_cap_is_absolute_or_added(
    given: object, cap: float | None, spent: float, new: float
) -> None:
    parsed = fields.budget_cap(given)
    assert isinstance(parsed, BudgetChange)
    assert parsed.applied(cap, spent) == pytest.approx(new)


@pytest.mark.parametrize("given", ["", "+", "0", "+0", "-1", "+-1", "ten", "nan", "inf", "+inf", True, None])
def test_a_bad_budget_cap_says_what_to_give(given: object) -> None:
    problem = fields.budget_cap(given, lambda v: f"<{v}>")
    assert isinstance(problem, fields.Problem)
    assert "like 0.50, or +0.20 to add to the cap" in problem.text and f"<{given}>" in problem.text


def test_the_one_budget_validator_refuses_infinity() -> None:
    assert isinstance(fields.budget_usd(float("inf")), fields.Problem)
    assert fields.budget_usd(2) == 2.0


def test_persistent_is_a_boolean_field() -> None:
    assert fields.persistent(True) is True and fields.persistent(False) is False
    problem = fields.persistent("yes", lambda v: f'"{v}"')
    assert isinstance(problem, fields.Problem) and problem.text == 'expected true or false, got "yes"'


# -- status, class, exit code -------------------------------------------------------------------
def test_paused_is_its_own_class_and_counted_apart() -> None:
    assert class_from_status(Status.PAUSED) is FailureClass.PAUSED
    assert class_from_status(Status.BUDGET) is FailureClass.BUDGET  # not persistent: as before
    counts = count_classes([FailureClass.PASSED, FailureClass.PAUSED, FailureClass.BUDGET, None])
    assert counts == {
        "passed": 1,
        "agent": 0,
        "verifier": 0,
        "infrastructure": 0,
        "timeout": 0,
        "budget": 1,
        "disk": 0,
        "paused": 1,
        "pending": 1,
    }
    assert describe_counts(counts) == "not passed: budget 1 · paused 1"


def test_the_exit_code_with_paused_jobs() -> None:
    paused = count_classes([FailureClass.PASSED, FailureClass.PAUSED])
    assert exit_code_for(paused, threshold_met=False) == EXIT_PAUSED == 4
    assert exit_code_for(paused, threshold_met=True) == EXIT_OK  # --fail-under met in spite of it
    assert exit_code_for(paused, threshold_met=False, regression=True) == EXIT_BELOW_THRESHOLD
    infra = count_classes([FailureClass.PAUSED, FailureClass.INFRASTRUCTURE])
    assert exit_code_for(infra, threshold_met=False) == EXIT_INFRASTRUCTURE
    failed = count_classes([FailureClass.PASSED, FailureClass.AGENT])
    assert exit_code_for(failed, threshold_met=False) == EXIT_BELOW_THRESHOLD


# -- the reason and the history -----------------------------------------------------------------
def test_the_reason_names_the_cap_that_was_reached() -> None:
    own = pause_reason(Spend(job_spent=0.0523, job_cap=0.05), "count")
    assert own.startswith("budget reached: spent $0.0523 of $0.0500; step count interrupted")
    assert "wake JOB --budget-usd +N" in own
    batch = pause_reason(Spend(job_spent=0.02, job_cap=1.0, batch_spent=0.051, batch_cap=0.05))
    assert batch.startswith("batch budget reached: the batch spent $0.0510 of $0.0500 (")
    both = pause_reason(Spend(job_spent=0.06, job_cap=0.05, batch_spent=0.2, batch_cap=0.1))
    assert both.startswith("budget reached: spent $0.0600 of $0.0500")  # the one wake raises


def test_a_history_entry_has_the_caps_the_total_and_this_runs_part() -> None:
    entry = history_entry(
        attempt=2,
        status="passed",
        spend=Spend(job_spent=0.2, job_cap=0.25, batch_spent=0.3, batch_cap=1.0),
        spent_before=0.0523,
    )
    assert entry == {
        "attempt": 2,
        "status": "passed",
        "budget_usd": 0.25,
        "spent_usd": 0.2,
        "attempt_usd": 0.1477,
        "batch_budget_usd": 1.0,
        "batch_spent_usd": 0.3,
    }
    assert read_history([entry, "junk", 3]) == (entry,)
    assert read_history("not a list") == () and read_history(None) == ()


def test_the_record_keeps_its_history_through_json(tmp_path: Path) -> None:
    job = JobSpec(id="j", task="t", variant="v", repeat=1, matrix={}, prompt="p", persistent=True)
    entry = history_entry(attempt=1, status="paused", spend=Spend(0.06, 0.05), spent_before=0, step="s")
    record = replace(new_record(job, batch="b", image_id=IMAGE, status="paused"), budget_history=(entry,))
    again = JobRecord.from_dict(record.to_dict())
    assert again.budget_history == (entry,) and again.status == "paused"
    assert again.spec.persistent is True
    plain = new_record(replace(job, persistent=False), batch="b", image_id=IMAGE)
    assert (
        "budget_history" not in plain.to_dict() and "persistent" not in plain.spec.to_dict()
    )  # hashes as before


# -- planning a batch that has paused jobs --------------------------------------------------------
JOBS = """
[batch]
name = "b"
[defaults]
prompt = "go"
persistent = true
budget_usd = {cap}
[tasks.a]
[tasks.b]
[tasks.c]
[tasks.d]
"""


def _jobs(tmp_path: Path, cap: float = 0.05) -> tuple[JobSpec, ...]:
    path = tmp_path / "jobs.toml"
    path.write_text(textwrap.dedent(JOBS.format(cap=cap)))
    return load_jobs_file(path).jobs


def test_a_paused_job_is_continued_a_finished_one_kept_a_skipped_one_run(tmp_path: Path) -> None:
    a, b, c, d = _jobs(tmp_path)
    assert a.persistent
    records = {
        a.id: new_record(a, batch="b", image_id=IMAGE, status="passed"),
        b.id: new_record(b, batch="b", image_id=IMAGE, status="paused"),
        c.id: new_record(c, batch="b", image_id=IMAGE, status="skipped"),
        d.id: new_record(d, batch="b", image_id=IMAGE, status="budget"),
    }
    plan = plan_resume([a, b, c, d], IMAGE, records)
    assert [x.action for x in plan.decisions] == [Action.KEEP, Action.WAKE, Action.RUN, Action.KEEP]
    assert plan.to_wake == {b.id} and {x.job_id for x in plan.to_run} == {b.id, c.id}
    assert plan.summary() == "2 kept, 2 to run (1 paused, continued)"
    # a raised budget_usd of its own still continues it (the cap is what wake raises) ...
    raised = _jobs(tmp_path, cap=0.5)
    assert plan_resume(raised, IMAGE, records).decisions[1].action is Action.WAKE
    # ... any other change of inputs starts it over, as does --fresh
    other = replace(b, prompt="something else")
    assert plan_resume([other], IMAGE, records).decisions[0].action is Action.RUN
    assert plan_resume([b], IMAGE, records, fresh=True).decisions[0].action is Action.RUN
    assert plan_resume([b], IMAGE, records, retry_failed=True).decisions[0].action is Action.WAKE


# -- the reports -------------------------------------------------------------------------------------
def test_reports_count_paused_apart_and_fail_under_counts_it_as_not_passed(tmp_path: Path) -> None:
    a, b, c, d = _jobs(tmp_path)
    outcomes = {
        a.id: JobOutcome(a.id, Status.PASSED),
        b.id: JobOutcome(b.id, Status.PAUSED, reason="budget reached: spent $0.0600 of $0.0500"),
        c.id: JobOutcome(c.id, Status.SKIPPED, reason="not started: the batch budget was spent"),
        d.id: JobOutcome(d.id, Status.PASSED),
    }
    results = BatchResults("b", list((a, b, c, d)), outcomes, image_id=IMAGE)
    assert results.class_counts()["paused"] == 1 and results.class_counts()["budget"] == 1
    assert results.ci_passed(0.5) and not results.ci_passed(0.75)  # 2 of 4: paused is not passed
    doc = results.to_document()
    assert doc["classes"]["paused"] == 1
    assert [j["status"] for j in doc["jobs"]] == ["passed", "paused", "skipped", "passed"]
    assert "paused 1" in summary_line(results)
    suites = ET.fromstring(junit_xml(results)).findall("testsuite")  # one per task
    for key, want in (("failures", 0), ("errors", 0), ("skipped", 2), ("tests", 4)):
        assert sum(int(s.get(key) or 0) for s in suites) == want, key
    paused = {
        s.get("name"): p.get("value") for s in suites for p in s.iter("property") if p.get("name") == "paused"
    }
    assert paused == {"a": "0", "b": "1", "c": "0", "d": "0"}
    skipped = [case.find("skipped") for s in suites for case in s.iter("testcase")]
    messages = [x.get("message") for x in skipped if x is not None]
    assert messages == [
        "paused: budget reached: spent $0.0600 of $0.0500",
        "not started: the batch budget was spent",
    ]
