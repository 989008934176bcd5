"""Regression tests for review findings in flower_batch (pure: no Docker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flower.scripted import read_request_log
from flower_batch.gateway.routing import PerJobLog


def test_budget_refusal_of_a_valid_job_stays_in_its_log(tmp_path: Path) -> None:
    log = PerJobLog(tmp_path)
    log.add({"prefix": "/j/job-1", "rule": "gateway:budget", "status": 402})
    log.add({"prefix": "/j/job-1", "rule": "gateway:bad-token", "status": 401})
    log.add({"prefix": "", "rule": "gateway:no-job", "status": 404})
    own = list(read_request_log(tmp_path / "job-1" / "logs" / "gateway.jsonl"))
    unrouted = list(read_request_log(tmp_path / "gateway-unrouted.jsonl"))
    assert [r["rule"] for r in own] == ["gateway:budget"]
    assert [r["rule"] for r in unrouted] == ["gateway:bad-token", "gateway:no-job"]


def gateway_name(batch: str, session: str, suffix: str) -> str:
    from flower_batch.gateway.sidecar import GatewaySidecar

    gw = GatewaySidecar(None, batch=batch, session=session, suffix=suffix, image_id="sha256:x",  # type: ignore[arg-type]
                        batch_dir=Path("/nonexistent"), scenario=None, mode="replay")
    return gw.name


def test_gateway_names_stay_unique_and_short_for_long_batch_names() -> None:
    long_a = "nightly-evaluation-of-the-refactoring-agents-" + "x" * 40
    long_b = long_a + "-v2"
    names = {
        gateway_name(batch, session, suffix)
        for batch in (long_a, long_b, "demo")
        for session in ("0123abcd", "89ef4567")
        for suffix in ("", "-g0", "-g1", "-g12")
    }
    assert len(names) == 3 * 2 * 4
    assert all(len(n + "-gateway") <= 63 and len(n + "-out") <= 63 for n in names)
    assert all(n.startswith("fb-") for n in names)
    assert len(gateway_name("demo", "s" * 80, "-g3") + "-gateway") <= 63


def _adhoc(tmp_path: Path, **kw):
    from flower_batch.running.jobs import adhoc_spec

    ws = tmp_path / "ws"
    if not ws.exists():
        ws.mkdir()
        (ws / "a.txt").write_text("one\n")
    args = dict(workspace=ws, task="say hi", workflow=None, prompt=None, name="j1", timeout="10m", cpus=None,
                memory=None, env={}, secrets_=[], scenario=None, environ={})
    args.update(kw)
    return adhoc_spec(**args)


def test_run_spec_hashes_workspace_and_scenario(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text("# empty\n")
    spec = _adhoc(tmp_path, scenario=scenario)
    assert spec.workspace_hash and spec.workspace_hash.startswith("sha256:")
    assert spec.gateway.scenario_hash and spec.gateway.scenario_hash.startswith("sha256:")
    before = spec.inputs_hash("sha256:img")
    (tmp_path / "ws" / "a.txt").write_text("two\n")
    assert _adhoc(tmp_path, scenario=scenario).inputs_hash("sha256:img") != before


def test_run_refuses_unset_secret_and_bad_cpus_before_anything_exists(tmp_path: Path) -> None:
    from flower_batch.errors import FlowerBatchError

    with pytest.raises(FlowerBatchError, match="NOPE_X"):
        _adhoc(tmp_path, secrets_=["NOPE_X"], environ={})
    assert _adhoc(tmp_path, secrets_=["NOPE_X"], environ={"NOPE_X": "v"}).secrets == ("NOPE_X",)
    for cpus in (-1.0, 0.0):
        with pytest.raises(FlowerBatchError, match="--cpus"):
            _adhoc(tmp_path, cpus=cpus)
    with pytest.raises(FlowerBatchError, match="ANTHROPIC_API_KEY"):
        _adhoc(tmp_path, secrets_=["ANTHROPIC_API_KEY"], environ={"ANTHROPIC_API_KEY": "sk"})


def test_run_cli_refuses_unset_secret_without_creating_the_job(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flower_batch.cli import app

    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "home"
    result = CliRunner().invoke(app, ["run", str(ws), "hi", "--secret", "NOPE_X_UNSET_9", "--name", "j1",
                                      "--image", "sha256:" + "0" * 64, "--home", str(home)],
                                env={"NOPE_X_UNSET_9": ""})
    assert result.exit_code == 2
    assert not (home / "adhoc" / "j1").exists()


def test_env_names_one_rule_for_cli_and_jobs_toml(tmp_path: Path) -> None:
    import typer

    from flower_batch.commands.jobs import _parse_env
    from flower_batch.matrix import MatrixFileError, load_jobs_file

    def cli_ok(name: str) -> bool:
        try:
            _parse_env([f"{name}=me"])
            return True
        except typer.Exit:
            return False

    def toml_ok(name: str) -> bool:
        (tmp_path / "ws").mkdir(exist_ok=True)
        path = tmp_path / "jobs.toml"
        path.write_text(f'[batch]\nname = "b"\n[defaults]\nenv = {{ {name} = "me" }}\n'
                        '[tasks.t]\nworkspace = "ws"\nprompt = "hi"\n')
        try:
            load_jobs_file(path)
            return True
        except MatrixFileError:
            return False

    for name, allowed in (("AUTHOR", True), ("OAUTH_SCOPE", True), ("MONKEY_PATCH", True), ("GITHUB_TOKEN", False),
                          ("OPENAI_API_KEY", False), ("ANTHROPIC_MODEL", False), ("ANTHROPIC_BASE_URL", False)):
        assert cli_ok(name) is allowed, name
        assert toml_ok(name) is allowed, name
    with pytest.raises(typer.Exit):
        _parse_env(["1BAD=x"])


def _spec(job_id: str, mode: str = "anthropic"):
    from flower_batch.matrix import GatewaySpec, JobSpec

    return JobSpec(id=job_id, task="t", variant="v", repeat=1, matrix={}, prompt="hi", gateway=GatewaySpec(mode=mode))


@pytest.mark.anyio
async def test_a_job_whose_gateway_cannot_start_ends_error_and_earlier_verdicts_survive_until_start(
    tmp_path: Path, monkeypatch
) -> None:
    """No ANTHROPIC_API_KEY: each job's gateway fails. That must not crash the batch (no
    ExceptionGroup) nor leave `queued` records; and a job with an earlier finished record keeps it
    until the job itself is started."""
    from flower_batch.backend.fake import FakeBackend
    from flower_batch.layout import Home
    from flower_batch.matrix import JobOutcome, Status, new_record, read_record, write_record
    from flower_batch.running.scheduler import run_jobs

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = Home(tmp_path / "home")
    first, second = _spec("first"), _spec("second")
    old = new_record(second, batch="b", image_id="sha256:img", attempt=1).with_outcome(
        JobOutcome(job_id="second", status=Status.PASSED, gateway_mode="anthropic"), finished_at="2026-01-01T00:00:00+00:00")
    write_record(home.job("b", "second").record_path, old)
    seen: dict[str, str] = {}

    def on_state(job_id: str, state: str) -> None:
        if job_id == "first" and state == "error":
            seen["second"] = read_record(home.job("b", "second").record_path).status

    async with FakeBackend() as backend:
        done = await run_jobs(backend, home, "b", [(first, None), (second, old)], image_id="sha256:img",
                              versions={}, parallel=1, on_state=on_state)
    assert seen == {"second": "passed"}  # not overwritten by `queued` before it started
    for job_id in ("first", "second"):
        record = read_record(home.job("b", job_id).record_path)
        assert record.status == "error" and done[job_id].status == "error"
        assert "ANTHROPIC_API_KEY" in (record.reason or "")
    assert read_record(home.job("b", "second").record_path).attempt == 2


def _jobs_file(tmp_path: Path, gateway: str) -> Path:
    (tmp_path / "ws").mkdir(exist_ok=True)
    path = tmp_path / "jobs.toml"
    path.write_text(f'[batch]\nname = "b"\n[defaults]\ngateway = {gateway}\n'
                    '[tasks.t]\nworkspace = "ws"\nprompt = "hi"\n')
    return path


def _matrix(tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    from typer.testing import CliRunner

    from flower_batch.cli import app

    return CliRunner().invoke(app, [*args, "--home", str(tmp_path / "home")], env=env)


def test_matrix_checks_gateway_mode_needs_before_anything_runs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    jobs = _jobs_file(tmp_path, '{ mode = "anthropic" }')
    result = _matrix(tmp_path, "matrix", str(jobs), "--image", "sha256:" + "0" * 64)
    assert result.exit_code == 2
    assert "gateway mode anthropic needs your API key in ANTHROPIC_API_KEY" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "home" / "b").exists()


@pytest.mark.parametrize("parallel", ["0", "-3"])
def test_matrix_refuses_parallel_below_one(tmp_path: Path, parallel: str) -> None:
    jobs = _jobs_file(tmp_path, '{ mode = "anthropic" }')
    result = _matrix(tmp_path, "matrix", str(jobs), "-j", parallel, "--dry-run",
                     env={"ANTHROPIC_API_KEY": "sk-test"})
    assert result.exit_code == 2
    assert "--parallel" in result.output and len(result.output.strip().splitlines()) == 1


def test_run_async_says_an_exception_group_of_our_errors_in_one_line(capsys) -> None:
    import typer

    from flower_batch.commands.common import run_async
    from flower_batch.errors import GatewayError

    async def boom() -> None:
        raise ExceptionGroup("task group", [GatewayError("the gateway\ndid not start"), GatewayError("again")])

    with pytest.raises(typer.Exit) as exit_info:
        run_async(boom)
    assert exit_info.value.exit_code == 2
    assert capsys.readouterr().err.strip() == "flower-batch: the gateway did not start"


def test_report_on_a_damaged_batch_json_warns_once_and_reports_from_records(tmp_path: Path) -> None:
    from flower_batch.layout import Home
    from flower_batch.matrix import JobOutcome, Status, new_record, write_record

    home = Home(tmp_path / "home")
    job = _spec("t.v.r1")
    record = new_record(job, batch="b", image_id="sha256:img", attempt=1).with_outcome(
        JobOutcome(job_id=job.id, status=Status.PASSED, gateway_mode="anthropic"), finished_at="2026-01-01T00:00:00+00:00")
    write_record(home.job("b", job.id).record_path, record)
    (home.batch_dir("b") / "batch.json").write_text('{"jobs_file": "/x/jobs.toml", "image_')  # cut short
    result = _matrix(tmp_path, "report", "b")
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 0
    assert sum("batch.json is unreadable" in line for line in result.output.splitlines()) == 1
    assert (home.batch_dir("b") / "report" / "results.json").exists()


def test_batch_file_is_written_atomically(tmp_path: Path, monkeypatch) -> None:
    from flower_batch.commands import matrix as matrix_cmd

    calls: list[Path] = []
    real = matrix_cmd.write_atomic

    def spy(path, data, **kw):  # type: ignore[no-untyped-def]
        calls.append(Path(path))
        real(path, data, **kw)

    monkeypatch.setattr(matrix_cmd, "write_atomic", spy)
    matrix_cmd._write_batch_file(tmp_path / "b", tmp_path / "jobs.toml", "sha256:img", {}, "scripted")
    assert calls == [tmp_path / "b" / "batch.json"]
    assert json.loads((tmp_path / "b" / "batch.json").read_text())["image_id"] == "sha256:img"


async def _run_one(tmp_path: Path, backend, job) -> object:
    from flower_batch.backend.fake import FakeBackend
    from flower_batch.gateway.sidecar import GatewaySidecar
    from flower_batch.layout import Home
    from flower_batch.running.runner import JobContext, run_job

    gw = GatewaySidecar(backend, batch="b", session="s1", image_id=FakeBackend.IMAGE, batch_dir=tmp_path / "b",
                        scenario=None, mode="replay")
    await backend.create_network(gw.network, {}, internal=True)
    ctx = JobContext(backend=backend, batch="b", session="s1", image_id=FakeBackend.IMAGE, gateway=gw)
    return await run_job(ctx, job, Home(tmp_path / "home").job("b", job.id))


@pytest.mark.anyio
async def test_a_job_whose_workspace_cannot_be_copied_ends_error_with_a_record(tmp_path: Path) -> None:
    from dataclasses import replace

    from flower_batch.backend.fake import FakeBackend
    from flower_batch.layout import Home
    from flower_batch.matrix import read_record

    job = replace(_spec("gone", mode="replay"), workspace=tmp_path / "no-such-workspace")
    async with FakeBackend() as backend:
        record = await _run_one(tmp_path, backend, job)
    on_disk = read_record(Home(tmp_path / "home").job("b", "gone").record_path)
    assert on_disk.status == "error" and on_disk.finished and on_disk == record
    assert "no-such-workspace" in (on_disk.reason or "") and "\n" not in (on_disk.reason or "")


@pytest.mark.anyio
async def test_a_container_that_never_stops_ends_error_not_a_traceback(tmp_path: Path) -> None:
    from flower_batch.backend.fake import FakeBackend, Script

    class Stuck(FakeBackend):
        async def wait(self, container_id: str, timeout: float | None = None) -> int:
            raise TimeoutError

    job = replace_timeout(_spec("stuck", mode="replay"), 0.05)
    async with Stuck(default=Script(duration_s=0.01)) as backend:
        record = await _run_one(tmp_path, backend, job)
    assert record.status == "error"  # type: ignore[attr-defined]
    assert "did not stop" in (record.reason or "")  # type: ignore[attr-defined]


def replace_timeout(job, seconds: float):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    return replace(job, timeout_s=seconds)


def test_one_table_each_for_modes_labels_memory_and_image_versions(monkeypatch) -> None:
    from types import SimpleNamespace

    from flower_batch.backend.base import parse_memory as strict_memory
    from flower_batch.commands import common as cmd_common
    from flower_batch.commands import jobs as jobs_cmd
    from flower_batch.gateway import host_modes, modes
    from flower_batch.matrix import gateway_label, parse_memory
    from flower_batch.running import image, repro

    assert modes.MODES is host_modes.MODES
    for mode in (*host_modes.MODES, "other"):
        assert jobs_cmd.mode_label(mode) == gateway_label(mode) == host_modes.mode_label(mode)
        assert modes.describe(mode, None).startswith(host_modes.mode_label(mode))
    for text in ("512m", "2g", "1.5GiB", "1024", "3k"):
        assert strict_memory(text) == parse_memory(text)
    with pytest.raises(ValueError):
        strict_memory("lots")

    fake = SimpleNamespace(id="sha256:abc", flower_batch_version="1", sdk_version="2", cli_version="3")
    monkeypatch.setattr(image, "read_image", lambda ref: fake)
    assert cmd_common.runtime_image("x") == repro.image_versions("x") == image.image_versions("x") == (
        "sha256:abc", {"flower_batch": "1", "sdk": "2", "cli": "3"})
