"""Records whose orchestrator is gone (issue 11 item 5, issue 10 item 4): `ls`, `show` and the
report show them as `orphaned` / `never-started`, never `running`/`queued` forever, and a Ctrl-C
of the matrix leaves no job `queued`. Fast: records written by hand, the session lock held by
this process (alive) or left free (a killed orchestrator)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.record import new_record, read_record, write_record
from flower_batch.jobmodel.spec import GatewaySpec, JobSpec
from flower_batch.jobmodel.status import Status
from flower_batch.layout import Home
from flower_batch.running.lease import Lease, leases_dir
from flower_batch.running.liveness import NEVER_STARTED, ORPHANED, Liveness


def _spec(job_id: str) -> JobSpec:
    return JobSpec(
        id=job_id,
        task="t",
        variant="v",
        repeat=1,
        matrix={},
        prompt="hi",
        gateway=GatewaySpec(mode="anthropic"),
    )


def _write(home: Home, job_id: str, status: str, session: str | None) -> None:
    write_record(
        home.job("b", job_id).record_path,
        new_record(_spec(job_id), batch="b", image_id="sha256:img", status=status, session=session),
    )


def _dead_session(home: Home) -> str:
    """A session whose orchestrator was SIGKILLed: its lock file is left behind, free."""
    session = Lease(home.root)
    session.path.parent.mkdir(parents=True, exist_ok=True)
    session.path.write_text("")
    return session.id


def _cli(home: Home, *args: str):
    from flower_batch.cli import app
    from flower_batch.commands.common import out

    out.width = 200  # a wide terminal: table cells unwrapped
    return CliRunner().invoke(app, [*args, "--home", str(home.root)])


def test_running_and_queued_records_of_a_dead_orchestrator_are_orphaned_and_never_started(
    tmp_path: Path,
) -> None:
    home = Home(tmp_path / "home")
    dead = _dead_session(home)
    _write(home, "was-running", "running", dead)
    _write(home, "was-queued", "queued", dead)
    with Lease(home.root) as alive:
        _write(home, "live-running", "running", alive.id)
        _write(home, "live-queued", "queued", alive.id)
        live = Liveness(home.root)
        shown = {jd.job: live.status(rec) for jd, rec in home.records("b")}  # type: ignore[arg-type]
        assert shown == {
            "was-running": ORPHANED,
            "was-queued": NEVER_STARTED,
            "live-running": "running",
            "live-queued": "queued",
        }
        rec = read_record(home.job("b", "was-running").record_path)
        assert dead in (live.reason(rec) or "") and "orphaned" in (live.reason(rec) or "")
        # ls --json: the shown state, the recorded one, and the reason
        rows = {r["job"]: r for r in json.loads(_cli(home, "ls", "--json").output)}
        assert (
            rows["was-running"]["status"] == ORPHANED and rows["was-running"]["recorded_status"] == "running"
        )
        assert (
            rows["was-queued"]["status"] == NEVER_STARTED and "never started" in rows["was-queued"]["reason"]
        )
        assert rows["live-running"]["status"] == "running"
        table = _cli(home, "ls").output
        assert ORPHANED in table and NEVER_STARTED in table
    # the live orchestrator exited (its lock file removed): its running record is orphaned too
    assert Liveness(home.root).status(read_record(home.job("b", "live-running").record_path)) == ORPHANED


def test_show_names_the_gone_orchestrator(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    dead = _dead_session(home)
    _write(home, "j1", "running", dead)
    shown = _cli(home, "show", "b/j1")
    assert shown.exit_code == 0, shown.output
    assert ORPHANED in shown.output and f"session {dead}" in shown.output
    doc = json.loads(_cli(home, "show", "b/j1", "--json").output)
    assert doc["status"] == ORPHANED and doc["record"]["status"] == "running"


def test_records_without_a_session_count_as_orphaned_only_when_no_orchestrator_lives(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    _write(home, "old", "running", None)  # written before records named their session
    old = read_record(home.job("b", "old").record_path)
    assert Liveness(home.root).status(old) == ORPHANED
    with Lease(home.root):
        assert Liveness(home.root).status(old) == "running"


def test_report_shows_orphaned_and_never_started(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    dead = _dead_session(home)
    _write(home, "a", "running", dead)
    _write(home, "b2", "queued", dead)
    finished = new_record(_spec("c"), batch="b", image_id="sha256:img").with_outcome(
        JobOutcome(job_id="c", status=Status.PASSED, gateway_mode="anthropic"),
        finished_at="2026-01-01T00:00:00+00:00",
    )
    write_record(home.job("b", "c").record_path, finished)
    result = _cli(home, "report", "b")
    assert result.exit_code == 0, result.output
    doc = json.loads((home.batch_dir("b") / "report" / "results.json").read_text())
    statuses = {j["id"]: j["status"] for j in doc["jobs"]}
    assert statuses == {"a": ORPHANED, "b2": NEVER_STARTED, "c": "passed"}
    assert "orphaned" in next(j for j in doc["jobs"] if j["id"] == "a")["reason"]
    html = (home.batch_dir("b") / "report" / "report.html").read_text()
    assert 'data-status="orphaned"' in html and 'data-status="never-started"' in html
    junit = (home.batch_dir("b") / "report" / "junit.xml").read_text()
    assert "orphaned: its orchestrator" in junit


@pytest.mark.anyio
async def test_a_stopped_matrix_marks_its_never_started_jobs(tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C while the first job runs (-j 1): the others never began and say so; none stays queued."""
    from flower_batch.gateway.host.sidecar import GatewaySettings
    from flower_batch.running.plan import BatchPlan
    from flower_batch.running.scheduler import run_jobs
    from tests.fake_backend import FakeBackend, Script

    settings = GatewaySettings(
        environ={"ANTHROPIC_API_KEY": "sk-test"}
    )  # the anthropic gateway's needs (fake engine)
    home = Home(tmp_path / "home")
    jobs = [(_spec(f"j{i}"), None) for i in range(3)]
    states: list[tuple[str, str]] = []
    job_running = anyio.Event()

    async def job_program(proc) -> int:  # type: ignore[no-untyped-def]
        job_running.set()
        await anyio.sleep(60)
        return 0

    gateway = Script(duration_s=60, log_lines=["gateway listening on 0.0.0.0:8080"])
    async with FakeBackend(programs={"flower": job_program, "python": gateway}) as backend:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    lambda: run_jobs(
                        backend,
                        BatchPlan(
                            home, "b", jobs, PinnedImage(FakeBackend.IMAGE, {}), parallel=1, settings=settings
                        ),
                        lambda j, s: states.append((j, s)),
                    )
                )
                with anyio.fail_after(20):
                    await job_running.wait()
                await anyio.sleep(0.05)
                scope.cancel()  # what Ctrl-C does to the orchestrator's work
    records = {jd.job: rec for jd, rec in home.records("b")}
    assert all(not isinstance(r, Exception) and r.status != "queued" for r in records.values()), records
    never = [j for j, r in records.items() if r.status == "skipped"]  # type: ignore[union-attr]
    assert len(never) == 2, records
    for job_id in never:
        rec = records[job_id]
        assert (rec.reason or "").startswith("never started")  # type: ignore[union-attr]
        assert Liveness(home.root).status(rec) == NEVER_STARTED  # type: ignore[arg-type]
        assert (job_id, "never-started") in states
    assert not list(leases_dir(home.root).glob("*.lock"))  # the session ended cleanly
