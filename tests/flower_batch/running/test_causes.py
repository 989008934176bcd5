"""Real causes in job records, failure classes, infra retries and exit codes, driven by the
FakeBackend: the runner, scheduler and `matrix` command as they are, with container programs
that leave what flower would leave (runs/.exit.json, runs/continuity.json) or die as a
container dies (OOM, SIGKILL, a start that fails)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from lxml import etree

from flower import exitinfo
from flower_batch.errors import BackendError
from flower_batch.gateway.host.sidecar import READY_LINE
from flower_batch.jobmodel.classes import FailureClass, count_classes, exit_code_for
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.record import read_record
from flower_batch.jobmodel.spec import GatewaySpec, JobSpec
from flower_batch.jobmodel.status import Status
from flower_batch.layout import Home
from flower_batch.running.batch import run_one
from flower_batch.running.causes import Ending, explain
from flower_batch.running.infra_retry import run_with_infra_retries
from flower_batch.running.plan import BatchPlan
from flower_batch.running.scheduler import run_jobs
from tests.fake_backend import FakeBackend, FakeProcess, Script

XSD = Path(__file__).resolve().parents[3] / "tests" / "schemas" / "junit.xsd"
GATEWAY = Script(duration_s=3600, log_lines=[READY_LINE])  # a gateway that is up until removed
IMAGE_ID = FakeBackend(images={FakeBackend.IMAGE: {}}).add_image(FakeBackend.IMAGE).id


def _scenario(tmp_path: Path) -> Path:
    path = tmp_path / "scenario.toml"
    path.write_text('[[rules]]\nname = "any"\nreply = "hi"\n')
    return path


def _job(tmp_path: Path, job_id: str = "t.v.r1", **kw: object) -> JobSpec:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    scenario = _scenario(tmp_path)
    fields: dict = dict(
        id=job_id,
        task="t",
        variant="v",
        repeat=1,
        matrix={},
        prompt="hi",
        workspace=ws,
        gateway=GatewaySpec(mode="scripted", scenario=scenario),
    )
    fields.update(kw)
    return JobSpec(**fields)


def leaves(kind: str, reason: str, code: int = 1, step: str | None = "fix") -> Script:
    """A container that exits as flower does after leaving its cause, with this run's stamp."""

    class Leaves(Script):
        async def __call__(self, proc: FakeProcess) -> int:
            proc.write_text(
                "/runs/.exit.json",
                json.dumps(
                    {
                        "format": exitinfo.EXIT_FORMAT,
                        "code": code,
                        "class": kind,
                        "reason": reason,
                        "step": step,
                        "stamp": proc.env["FLOWER_RUN_STAMP"],
                    }
                ),
            )
            return code

    return Leaves()


async def _start(tmp_path: Path, program, *, persistent: bool = False, job: JobSpec | None = None):  # type: ignore[no-untyped-def]
    home = Home(tmp_path / "home")
    job = job or _job(tmp_path)
    async with FakeBackend(programs={"python": GATEWAY, "flower": program}) as backend:
        plan = BatchPlan(home, "b", ((replace(job, persistent=persistent), None),), PinnedImage(IMAGE_ID, {}))
        return await run_one(backend, plan, lambda job_id, state: None)


@pytest.mark.anyio
async def test_flowers_own_line_replaces_the_exit_code(tmp_path: Path) -> None:
    line = "target 'boom.py:main': importing boom.py failed: RuntimeError: no flows today"
    record = await _start(tmp_path, leaves("target", line, code=2, step=None))
    assert record.status == "failed" and record.reason == line and record.failure_class == "agent"
    assert read_record(Home(tmp_path / "home").job("b", "t.v.r1").record_path) == record


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kind", "reason", "status", "klass"),
    [
        ("api", "step fix: API error 401: [scripted model] invalid x-api-key", "error", "infrastructure"),
        ("api", "step fix: API error 402: credit balance too low", "budget", "budget"),
        (
            "database",
            "/runs/sessions.db cannot be opened: database disk image is malformed",
            "error",
            "infrastructure",
        ),
        ("step", "step fix failed: the CLI ended without a result", "failed", "agent"),
        (  # flower's own writes found /runs full: the job's doing, never retried
            "disk",
            "the disk of the run directory /runs is full: lineage.json could not be written",
            "disk",
            "disk",
        ),
    ],
)
async def test_each_cause_of_flower_has_its_status_and_class(
    tmp_path: Path, kind: str, reason: str, status: str, klass: str
) -> None:
    record = await _start(tmp_path, leaves(kind, reason))
    assert (record.status, record.reason, record.failure_class) == (status, reason, klass)


@pytest.mark.anyio
async def test_a_stale_exit_file_of_an_earlier_run_is_not_this_runs_cause(tmp_path: Path) -> None:
    class Stale(Script):
        async def __call__(self, proc: FakeProcess) -> int:
            proc.write_text(
                "/runs/.exit.json",
                json.dumps(
                    {
                        "format": exitinfo.EXIT_FORMAT,
                        "code": 1,
                        "class": "target",
                        "reason": "an old import error",
                        "step": None,
                        "stamp": "an-earlier-container",
                    }
                ),
            )
            return 1

    record = await _start(tmp_path, Stale())
    assert record.status == "failed" and record.reason == "the workflow exited 1"


@pytest.mark.anyio
async def test_oom_killed_says_out_of_memory_and_is_the_agents(tmp_path: Path) -> None:
    class Hog(Script):
        async def __call__(self, proc: FakeProcess) -> int:
            proc.oom_kill()
            return 0

    record = await _start(tmp_path, Hog(), job=_job(tmp_path, memory_bytes=64 * 1024 * 1024))
    assert record.exit_code == 137 and record.status == "failed" and record.failure_class == "agent"
    assert record.reason == (
        "killed: out of memory (the job's memory limit 64m was reached; Docker reports OOMKilled)"
    )


@pytest.mark.anyio
async def test_a_sigkill_from_outside_is_infrastructure_and_says_so(tmp_path: Path) -> None:
    record = await _start(tmp_path, Script(exit_code=137))
    assert record.status == "error" and record.failure_class == "infrastructure"
    assert record.reason.startswith("killed from outside: SIGKILL (exit 137)")


@pytest.mark.anyio
async def test_a_persistent_jobs_record_carries_flowers_continuity(tmp_path: Path) -> None:
    entry = {"step": "fix", "continued": False, "session": "abc", "reason": "lineage.json unreadable: x"}

    class Writes(Script):
        async def __call__(self, proc: FakeProcess) -> int:
            proc.write_text(
                "/runs/continuity.json",
                json.dumps(
                    {
                        "format": "flower/continuity@1",
                        "run": "r",
                        "stamp": proc.env["FLOWER_RUN_STAMP"],
                        "steps": [entry],
                    }
                ),
            )
            return 0

    record = await _start(tmp_path, Writes(), persistent=True)
    assert record.status == "passed" and record.continuity == (entry,)
    assert read_record(Home(tmp_path / "home").job("b", "t.v.r1").record_path).continuity == (entry,)


def test_explain_keeps_verdicts_and_names_the_step_a_timeout_hit() -> None:
    cause = {"class": "signal", "reason": "killed by SIGTERM during step fix", "step": "fix"}
    got = explain(Status.TIMEOUT, "stopped at the job's timeout", Ending(143, timed_out=True), cause)
    assert (
        got.reason == "stopped at the job's timeout (during step fix)"
        and got.failure_class is FailureClass.TIMEOUT
    )
    checked = explain(Status.FAILED, "check exited 1", Ending(0), None, check_exit=1)
    assert checked.failure_class is FailureClass.VERIFIER and checked.reason == "check exited 1"
    outside = explain(Status.FAILED, None, Ending(143), cause)
    assert outside.status is Status.ERROR and "not the job's timeout: sent from outside" in outside.reason


# -- infrastructure retries and the exit code ----------------------------------------------------
class FlakyStart(FakeBackend):
    """Job containers fail to start `failures` times (as a daemon hiccup would), then start."""

    def __init__(self, failures: int, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.failures = failures
        self.job_starts = 0

    async def start(self, container_id: str) -> None:
        if self._get(container_id).spec.command[:1] == ["/opt/flower/bin/flower"]:
            self.job_starts += 1
            if self.job_starts <= self.failures:
                raise BackendError(
                    f"Docker refused to start container {container_id[:12]}: OCI runtime error"
                )
        await super().start(container_id)


async def _retrying(tmp_path: Path, failures: int, retries: int) -> tuple[dict, FlakyStart]:
    home = Home(tmp_path / "home")
    job = _job(tmp_path)
    retried: list[tuple[int, list[str]]] = []
    async with FlakyStart(failures, programs={"python": GATEWAY, "flower": Script(exit_code=0)}) as backend:

        async def one_round(jobs):  # type: ignore[no-untyped-def]
            return await run_jobs(backend, BatchPlan(home, "b", jobs, PinnedImage(IMAGE_ID, {}), parallel=1))

        done = await run_with_infra_retries(
            one_round, [(job, None)], retries=retries, on_retry=lambda n, ids: retried.append((n, ids))
        )
    assert retried == [(n, [job.id]) for n in range(1, min(failures, retries) + 1)]
    return done, backend


@pytest.mark.anyio
async def test_a_container_that_fails_to_start_twice_is_retried_and_passes(tmp_path: Path) -> None:
    done, backend = await _retrying(tmp_path, failures=2, retries=2)
    record = done["t.v.r1"]
    assert record.status == "passed" and record.attempt == 3 and backend.job_starts == 3


@pytest.mark.anyio
async def test_retries_are_bounded_and_what_remains_is_infrastructure(tmp_path: Path) -> None:
    done, backend = await _retrying(tmp_path, failures=99, retries=2)
    record = done["t.v.r1"]
    assert backend.job_starts == 3 and record.status == "error" and record.failure_class == "infrastructure"
    assert "OCI runtime error" in (record.reason or "")
    assert exit_code_for(count_classes([FailureClass(record.failure_class)]), threshold_met=True) == 3


@pytest.mark.anyio
async def test_verdicts_are_never_retried(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    calls = []
    async with FakeBackend(programs={"python": GATEWAY, "flower": Script(exit_code=1)}) as backend:

        async def one_round(jobs):  # type: ignore[no-untyped-def]
            calls.append([j.id for j, _ in jobs])
            return await run_jobs(backend, BatchPlan(home, "b", jobs, PinnedImage(IMAGE_ID, {}), parallel=1))

        done = await run_with_infra_retries(one_round, [(_job(tmp_path), None)], retries=2)
    assert calls == [["t.v.r1"]] and done["t.v.r1"].failure_class == "agent"


def test_exit_codes_from_class_counts() -> None:
    counts = count_classes([FailureClass.PASSED, FailureClass.AGENT, FailureClass.VERIFIER])
    assert exit_code_for(counts, threshold_met=True) == 0
    assert exit_code_for(counts, threshold_met=False) == 1
    assert exit_code_for(counts, threshold_met=True, regression=True) == 1
    with_infra = count_classes([FailureClass.PASSED, FailureClass.INFRASTRUCTURE])
    assert exit_code_for(with_infra, threshold_met=True) == 3  # an untrustworthy verdict wins
    assert count_classes([None])["pending"] == 1


# -- the command: `matrix` on the FakeBackend -----------------------------------------------------
def _matrix_project(tmp_path: Path, name: str = "infra") -> Path:
    (tmp_path / "ws").mkdir(exist_ok=True)
    _scenario(tmp_path)
    path = tmp_path / "jobs.toml"
    path.write_text(
        f'[batch]\nname = "{name}"\n[defaults]\ngateway = {{ mode = "scripted", scenario = "scenario.toml" }}\n'
        '[tasks.t]\nworkspace = "ws"\nprompt = "hi"\n[tasks.u]\nworkspace = "ws"\nprompt = "hi"\n'
        'check = "false"\n'
    )
    return path


def _matrix(tmp_path: Path, monkeypatch, backend_factory, *flags: str):  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from flower_batch.cli import app
    from flower_batch.commands import environments as environments_cmd
    from flower_batch.commands import matrix as matrix_cmd

    monkeypatch.setattr(matrix_cmd, "backend_for", lambda home, flag=None, recorded=None: backend_factory())
    monkeypatch.setattr(environments_cmd, "pinned_image", lambda ref: PinnedImage(IMAGE_ID, {}))
    jobs = _matrix_project(tmp_path)
    return CliRunner().invoke(app, ["matrix", str(jobs), *flags, "--home", str(tmp_path / "home")])


def _programs(flower: Script) -> dict:
    return {"python": GATEWAY, "flower": flower, "sh": Script(exit_code=1)}


def test_matrix_exits_3_when_infrastructure_errors_remain(tmp_path: Path, monkeypatch) -> None:
    result = _matrix(
        tmp_path,
        monkeypatch,
        lambda: FlakyStart(99, programs=_programs(Script(exit_code=0))),
        "--infra-retries",
        "1",
    )
    assert result.exit_code == 3, result.output
    assert result.output.count("infrastructure errors: running 2 job(s) again (retry 1/1)") == 1
    report = tmp_path / "home" / "infra" / "report"
    document = json.loads((report / "results.json").read_text())
    assert document["classes"]["infrastructure"] == 2 and all(
        j["class"] == "infrastructure" for j in document["jobs"]
    )
    root = ET.parse(report / "junit.xml").getroot()
    assert root.get("errors") == "2" and root.get("failures") == "0"
    assert etree.XMLSchema(etree.parse(str(XSD))).validate(etree.parse(str(report / "junit.xml")))
    attempts = {
        j: read_record(tmp_path / "home" / "infra" / j / "record.json").attempt for j in ("t.r1", "u.r1")
    }
    assert set(attempts.values()) == {2}


def test_matrix_counts_agent_verifier_and_infrastructure_apart(tmp_path: Path, monkeypatch) -> None:
    # t's container never starts (infrastructure); u's workflow passes and its check fails (verifier).
    class OnlyUStarts(FakeBackend):
        async def start(self, container_id: str) -> None:
            spec = self._get(container_id).spec
            if spec.command[:1] == ["/opt/flower/bin/flower"] and spec.env.get(
                "FLOWER_BATCH_JOB", ""
            ).startswith("t."):
                raise BackendError("Docker refused to start the container: no space left on device")
            await super().start(container_id)

    result = _matrix(
        tmp_path,
        monkeypatch,
        lambda: OnlyUStarts(programs=_programs(Script(exit_code=0))),
        "--infra-retries",
        "0",
    )
    assert result.exit_code == 3, result.output
    assert "not passed: verifier 1 · infrastructure 1" in result.output
    root = ET.parse(tmp_path / "home" / "infra" / "report" / "junit.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["t.r1"].find("error").get("type") == "infrastructure"
    assert cases["u.r1"].find("failure").get("type") == "verifier"
    assert etree.XMLSchema(etree.parse(str(XSD))).validate(
        etree.parse(str(tmp_path / "home" / "infra" / "report" / "junit.xml"))
    )


def test_matrix_refuses_negative_infra_retries(tmp_path: Path, monkeypatch) -> None:
    result = _matrix(tmp_path, monkeypatch, FakeBackend, "--infra-retries", "-1")
    assert result.exit_code == 2 and "--infra-retries -1" in result.output
    assert not (tmp_path / "home" / "infra").exists()


def test_the_jobs_exit_and_continuity_files_are_read_as_hostile(tmp_path: Path) -> None:
    """runs/ is the job's: a link out of it, a FIFO or a huge file is no cause, and never blocks."""
    import os

    from flower_batch.running.causes import EXIT_FILE_LIMIT, continuity_of, flower_exit

    runs, outside = tmp_path / "runs", tmp_path / "host"
    runs.mkdir()
    outside.mkdir()
    exitinfo.leave(outside, code=1, kind="step", reason="from outside the job", stamp="s")
    assert exitinfo.read(outside, stamp="s") is not None
    (runs / ".exit.json").symlink_to(outside / ".exit.json")
    assert flower_exit(runs, "s") is None  # a link out of the job is not followed
    (runs / ".exit.json").unlink()
    os.mkfifo(runs / ".exit.json")
    assert flower_exit(runs, "s") is None  # a FIFO is refused, not waited on
    (runs / ".exit.json").unlink()
    (runs / ".exit.json").write_text(" " * EXIT_FILE_LIMIT + "{}")
    assert flower_exit(runs, "s") is None  # past its cap: not parsed
    os.mkfifo(runs / "continuity.json")
    assert continuity_of(runs, "s") == ()
    (runs / ".exit.json").unlink()
    exitinfo.leave(runs, code=1, kind="step", reason="the job's own", stamp="s")
    own = flower_exit(runs, "s")
    assert own is not None and own == exitinfo.read(runs, stamp="s") and own["reason"] == "the job's own"
