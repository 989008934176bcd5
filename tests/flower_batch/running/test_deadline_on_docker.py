"""A job at its timeout ends gracefully (issue 20): flower, told the job's deadline by the
orchestrator, tells the agent its time left, passes on the 50% notice, interrupts the turn at
the deadline and asks for notes; the agent writes them within the wrap-up window, the job ends
`timeout` with the notes kept (before the orchestrator's SIGTERM), and `wake` continues the
same session, pointed at the notes. Real Docker, the real CLI, the scripted gateway."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.batch_fixtures.rig import PROJECT, Job, fb, leftovers, message_texts, private_home, runtime_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SOLO = f"{PROJECT}/flows.py:solo"
DEADLINE = PROJECT / "scenarios" / "deadline.toml"
QUICK = PROJECT / "scenarios" / "quick.toml"
TIMEOUT_S = 40
WRAP_UP_S = 20


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield from private_home(tmp_path)


def test_a_job_at_its_timeout_writes_its_notes_ends_timeout_and_wake_goes_on(home: Path) -> None:
    image = runtime_image()
    ran = fb(
        "run",
        PROJECT / "tasks" / "slow",
        "-f",
        SOLO,
        "--prompt",
        "Read TASK.md and do what it asks.",
        "--scenario",
        DEADLINE,
        "--name",
        "late",
        "--timeout",
        f"{TIMEOUT_S}s",
        "--persistent",
        "--env",
        f"FLOWER_WRAP_UP={WRAP_UP_S}",
        "--budget-usd",
        "1",
        "--image",
        image,
        home=home,
    )
    job = Job(home, "adhoc", "late")
    rec = job.record()
    assert ran.returncode == 1, ran.stderr
    assert rec["status"] == "timeout", rec["reason"]
    assert "收尾-do.md" in rec["reason"] and "during step do" in rec["reason"]
    # flower ended by itself, within the wrap-up window: no SIGTERM (exit 143), no kill
    assert rec["exit_code"] == 1
    assert TIMEOUT_S <= rec["duration_s"] < TIMEOUT_S + WRAP_UP_S, rec["duration_s"]
    last = job.manifest()[-1]
    assert last["step"] == "do" and last["error"].startswith("timeout: the deadline passed")
    notes = job.root / "workspace" / ".flower" / "notes" / "收尾-do.md"
    assert "NOTES-NEXT-STEP" in notes.read_text(encoding="utf-8")

    log = [r for r in job.gateway_log() if r.get("endpoint") == "messages"]
    rules = [r["rule"] for r in log]
    assert rules[:2] == ["read the task", "wait"] and "notes" in rules, rules
    opening = message_texts(log[0])
    assert "剩余时间" in opening and "剩余预算 $1.00（共 $1.00，已用 $0.0000）" in opening  # at the start
    stalled = next(r for r in log if r["rule"] == "stall")
    assert "时间已用 50%" in str(stalled["body"]["messages"])  # the notice after the tool that waited
    asked = next(r for r in log if r["rule"] == "notes")
    assert "waited-60pc" in message_texts(asked) and asked["session"] == log[0]["session"]

    woken = fb("wake", "late", home=home, timeout=120)
    assert woken.returncode == 0, woken.stderr
    assert job.record()["status"] == "passed"
    after = [r for r in job.gateway_log() if r.get("endpoint") == "messages"]
    wake = next(r for r in after if r["rule"] == "woken")
    assert wake["session"] == log[0]["session"]  # the same session ...
    assert str(notes.relative_to(job.root)).replace("workspace", "") in message_texts(
        wake
    )  # ... to its notes
    assert "Reading the task." in message_texts(wake)  # ... with its history
    spent = rec["cost_usd"]
    assert spent and f"已用 ${spent:.4f}" in message_texts(wake)  # the meter's spend of the first run
    assert not leftovers(home, "adhoc")


def test_the_agent_is_told_its_budget_and_notices_can_be_switched_off(home: Path) -> None:
    image = runtime_image()
    base = ["-f", SOLO, "--prompt", "Read TASK.md and do what it asks.", "--scenario", QUICK]
    base += ["--budget-usd", "2", "--image", image]
    for name, extra in (("told", []), ("quiet", ["--env", "FLOWER_NOTICES=off"])):
        ran = fb("run", PROJECT / "tasks" / "alpha", *base, "--name", name, *extra, home=home)
        assert ran.returncode == 0, ran.stderr
    told = [
        message_texts(r) for r in Job(home, "adhoc", "told").gateway_log() if r.get("endpoint") == "messages"
    ]
    assert "剩余预算 $2.00" in told[0]
    quiet = [
        message_texts(r) for r in Job(home, "adhoc", "quiet").gateway_log() if r.get("endpoint") == "messages"
    ]
    assert quiet and not any("[flower]" in text for text in quiet)
