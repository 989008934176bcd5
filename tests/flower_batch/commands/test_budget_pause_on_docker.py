"""Budgets that pause (issue 20 items 1, 2, 5), end to end on Docker against the scripted model:
a persistent job at its budget ends `paused` with its session and workspace kept, `wake
--budget-usd +N` continues that session and it passes, its metered cost is the scenario's sum
over every run; a batch budget pauses the persistent job and skips the next, and `matrix` again
with a higher cap finishes both and keeps the finished one.

The job is bench/soakjob.py's: one step that loops `sh count.sh` until LEG-DONE, every answer at
its rule's usage in the scenario, so the cost each request must add is known in advance.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import soakjob
from flower_batch.gateway.prices import cost_usd
from tests.batch_fixtures.rig import (
    Job,
    fb,
    fb_start,
    leftovers,
    message_texts,
    private_home,
    runtime_image,
    wait_for,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

LEG = 20  # count.sh's LEG-DONE mark: more turns than $0.05 buys


@pytest.fixture(scope="module")
def image_id() -> str:
    return runtime_image()


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield from private_home(tmp_path)


def messages(job: Job) -> list[dict[str, Any]]:
    return [r for r in job.gateway_log() if r.get("endpoint") == "messages"]


def answered(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("status") == 200]


def costs_of(scenario: Path, records: list[dict[str, Any]]) -> list[float]:
    """What each answered request costs: its rule's usage in the scenario, priced as the gateway
    prices a scripted answer (the model the request asked for)."""
    usages = soakjob.rule_usages(scenario)
    return [cost_usd(str(r["model"]), usages[str(r["rule"])]) or 0.0 for r in answered(records)]


def meter_of(job: Job) -> dict[str, Any]:
    return json.loads((job.root / "logs" / "meter.json").read_text())


def test_a_persistent_job_pauses_at_its_budget_and_wake_with_more_continues_it(
    image_id: str, home: Path, tmp_path: Path
) -> None:
    files = soakjob.write_project(tmp_path / "p", leg=LEG, handoff_at=None)
    job = Job(home, "adhoc", "frugal")
    ran = fb(
        "run", files["workspace"], "-f", f"{files['flows']}:main", "--prompt", soakjob.PROMPT,
        "--scenario", files["scenario"], "--persistent", "--name", "frugal", "--image", image_id,
        "--budget-usd", "0.05", "--timeout", "5m", home=home, timeout=400,
    )  # fmt: skip
    assert ran.returncode == 4, ran.stderr[-3000:]  # paused: not a verdict, not a failure
    rec = job.record()
    assert rec["status"] == "paused" and rec["class"] == "paused", rec
    assert rec["reason"].startswith("budget reached: spent $") and "of $0.0500" in rec["reason"], rec
    assert "step count interrupted" in rec["reason"]
    # paused at the metered request that crossed the cap: every answer before it was under it,
    # and the one request after it was refused, never forwarded to the model
    before = messages(job)
    costs = costs_of(files["scenario"], before)
    assert sum(costs[:-1]) < 0.05 <= sum(costs), costs
    refused = [r for r in before if r.get("status") != 200]
    assert len(refused) == 1 and refused[0] is before[-1] and refused[0]["rule"] == "gateway:budget"
    meter = meter_of(job)
    assert meter["cost_usd"] == pytest.approx(sum(costs), abs=1e-6) and meter["refused"] == 1
    assert rec["cost_usd"] == pytest.approx(sum(costs), abs=1e-6)
    (row,) = job.manifest()
    assert row["step"] == "count" and not row["ok"] and "402" in row["error"]
    (entry,) = rec["budget_history"]
    assert entry["status"] == "paused" and entry["budget_usd"] == 0.05
    assert entry["interrupted_step"] == "count"
    assert entry["spent_usd"] == pytest.approx(sum(costs), abs=1e-6)
    # its session and workspace are kept as they were
    session = job.lineage()["steps"]["count"]
    count = int((job.root / "workspace" / ".count").read_text())
    assert 0 < count < LEG
    assert "paused" in fb("ls", home=home).stdout
    assert not leftovers(home, "adhoc"), leftovers(home, "adhoc").describe()

    # wake without more money: refused at once, nothing started
    again = fb("wake", "frugal", home=home)
    assert again.returncode == 2 and "--budget-usd +N" in again.stderr, again.stderr
    assert len(messages(job)) == len(before)

    woken = fb("wake", "frugal", "--budget-usd", "+0.20", home=home, timeout=400)
    assert woken.returncode == 0, woken.stderr[-3000:]
    assert "cap $0.0500 -> $0.2500" in woken.stderr
    rec = job.record()
    assert rec["status"] == "passed" and rec["attempt"] == 2 and rec["spec"]["budget_usd"] == 0.25
    assert (job.root / "workspace" / ".count").read_text().strip() == str(LEG)
    # the same session: the woken request carries the earlier history
    after = messages(job)[len(before) :]
    first = after[0]
    assert first["session"] == session == job.lineage()["steps"]["count"]
    # every turn up to the refused request (the CLI puts the prompt of the wake beside its last
    # tool result, so the count may stay the same)
    assert first["n_messages"] >= before[-1]["n_messages"] > 1
    assert f"count={count}" in message_texts(first)
    assert {r["session"] for r in after} == {session}
    # cost exact over the pause and the wake: the scenario's sum, nothing counted twice
    everything = costs_of(files["scenario"], messages(job))
    meter = meter_of(job)
    assert meter["exchanges"] == len(everything) and meter["incomplete"] == 0
    assert meter["cost_usd"] == pytest.approx(sum(everything), abs=1e-6)
    assert rec["cost_usd"] == pytest.approx(sum(everything), abs=1e-6)
    first_run, second_run = rec["budget_history"]
    assert first_run == entry
    assert second_run["status"] == "passed" and second_run["budget_usd"] == 0.25
    assert second_run["spent_usd"] == pytest.approx(sum(everything), abs=1e-6)
    assert second_run["attempt_usd"] == pytest.approx(sum(everything) - sum(costs), abs=1e-6)
    shown = fb("show", "frugal", home=home)
    assert "attempt 1: paused · cap $0.0500" in shown.stdout, shown.stdout
    assert not leftovers(home, "adhoc"), leftovers(home, "adhoc").describe()


JOBS_TOML = """
[batch]
name = "capped"
budget_usd = {budget}

[defaults]
workflow = "soak_flows:main"
prompt = "{prompt}"
timeout = "5m"
gateway = {{ mode = "scripted", scenario = "soak.toml" }}

[tasks.a-short]
workspace = "short"

[tasks.b-long]
workspace = "workspace"
persistent = true

[tasks.c-short]
workspace = "short"
"""


def test_a_batch_budget_pauses_one_job_skips_the_next_and_a_higher_cap_finishes_both(
    image_id: str, home: Path, tmp_path: Path
) -> None:
    root = tmp_path / "p"
    files = soakjob.write_project(root, leg=LEG, handoff_at=None)
    short = soakjob.write_project(tmp_path / "s", leg=2, handoff_at=None)["workspace"]
    (root / "short").mkdir()
    for name in ("count.sh", "COUNT.md"):
        (root / "short" / name).write_text((short / name).read_text())
    jobs = root / "jobs.toml"
    jobs.write_text(JOBS_TOML.format(budget=0.05, prompt=soakjob.PROMPT))
    first = fb("matrix", jobs, "-j", "1", "--image", image_id, home=home, cwd=root, timeout=600)
    assert first.returncode == 4, first.stderr[-3000:]  # below the bar, with a job paused
    a, b, c = (Job(home, "capped", f"{t}.r1") for t in ("a-short", "b-long", "c-short"))
    assert [j.status() for j in (a, b, c)] == ["passed", "paused", "skipped"]
    assert b.record()["reason"].startswith("batch budget reached: the batch spent $")
    doc = json.loads((home / "capped" / "report" / "results.json").read_text())
    assert doc["classes"]["paused"] == 1 and doc["classes"]["passed"] == 1 and doc["classes"]["budget"] == 1
    junit = (home / "capped" / "report" / "junit.xml").read_text()
    assert 'message="paused: batch budget reached' in junit and '<property name="paused" value="1"' in junit
    assert 'data-status="paused"' in (home / "capped" / "report" / "report.html").read_text()
    session = b.lineage()["steps"]["count"]
    a_finished = a.record()["finished_at"]
    b_before = len(messages(b))
    # again with the same cap: the paused job stays paused (nothing sent), nothing re-run
    same = fb("matrix", jobs, "-j", "1", "--image", image_id, home=home, cwd=root, timeout=600)
    assert same.returncode == 4, same.stderr[-3000:]
    assert [j.status() for j in (a, b, c)] == ["passed", "paused", "skipped"]
    assert len(messages(b)) == b_before and b.record()["attempt"] == 1

    raised = fb(
        "matrix", jobs, "-j", "1", "--image", image_id, "--budget-usd", "1", home=home, cwd=root, timeout=600
    )
    assert raised.returncode == 0, raised.stderr[-3000:]
    assert "1 kept, 2 to run (1 paused, continued)" in raised.stderr
    assert [j.status() for j in (a, b, c)] == ["passed", "passed", "passed"]
    assert a.record()["finished_at"] == a_finished and a.record()["attempt"] == 1  # kept, never re-run
    rec = b.record()
    assert rec["attempt"] == 2 and not (b.root / "attempts").exists()  # continued, not started over
    after = messages(b)[b_before:]
    assert after[0]["session"] == session
    assert after[0]["n_messages"] >= messages(b)[b_before - 1]["n_messages"] > 1
    assert (b.root / "workspace" / ".count").read_text().strip() == str(LEG)
    assert [e["status"] for e in rec["budget_history"]] == ["paused", "passed"]
    assert rec["budget_history"][1]["batch_budget_usd"] == 1.0
    for j in (a, b, c):  # every job's cost is exact, the paused one's over both its runs
        expected = costs_of(files["scenario"], messages(j))
        assert j.record()["cost_usd"] == pytest.approx(sum(expected), abs=1e-6), j.job
        assert math.isclose(meter_of(j)["cost_usd"], sum(expected), abs_tol=1e-6)
    assert not leftovers(home, "capped"), leftovers(home, "capped").describe()


def test_a_gateway_killed_during_the_wake_of_a_paused_job_keeps_the_cost_exact(
    image_id: str, home: Path, tmp_path: Path
) -> None:
    files = soakjob.write_project(tmp_path / "p", leg=LEG, handoff_at=None)
    job = Job(home, "adhoc", "killed-wake")
    ran = fb(
        "run", files["workspace"], "-f", f"{files['flows']}:main", "--prompt", soakjob.PROMPT,
        "--scenario", files["scenario"], "--persistent", "--name", job.job, "--image", image_id,
        "--budget-usd", "0.05", "--timeout", "5m", home=home, timeout=400,
    )  # fmt: skip
    assert ran.returncode == 4 and job.status() == "paused", ran.stderr[-3000:]
    paused_at = len(messages(job))
    woken = fb_start("wake", job.job, "--budget-usd", "0.5", home=home, log=tmp_path / "wake.out")
    wait_for(
        "the wake to get a few answers",
        lambda: len(answered(messages(job)[paused_at:])) >= 3 or woken.poll() is not None,
        timeout=300,
    )
    assert woken.poll() is None, (tmp_path / "wake.out").read_text()
    gateway = gateway_of(job)
    assert gateway is not None
    gateway.kill()  # SIGKILL, as `docker kill` does: the supervisor starts it again
    assert woken.wait(timeout=400) == 0, (tmp_path / "wake.out").read_text()
    rec = job.record()
    assert rec["status"] == "passed" and rec["gateway_health"]["restarts"] == 1, rec
    assert (job.root / "workspace" / ".count").read_text().strip() == str(LEG)
    # every answer the model sent over the pause, the wake and the kill is metered once
    log = job.gateway_log()
    expected = soakjob.expected_usage(files["scenario"], log)
    meter = meter_of(job)
    assert expected.accepts(meter, unlogged_starts=1), (meter, expected)
    assert rec["cost_usd"] == pytest.approx(meter["cost_usd"], abs=1e-6)
    assert [e["status"] for e in rec["budget_history"]] == ["paused", "passed"]
    assert not leftovers(home, "adhoc"), leftovers(home, "adhoc").describe()


def gateway_of(job: Job) -> Any:
    """The job's gateway container (the one of the orchestrator session in its record)."""
    from tests.batch_fixtures.rig import BATCH, LEASE, MANAGED, ROLE, docker_client

    client = docker_client()
    try:
        found = client.containers.list(
            filters={
                "label": [
                    f"{MANAGED}=1",
                    f"{BATCH}=adhoc",
                    f"{ROLE}=gateway",
                    f"{LEASE}={job.record()['session']}",
                ]
            }
        )
    finally:
        client.close()
    return found[0] if found else None
