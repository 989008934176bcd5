"""The demo batch (examples/jobs.toml: 2 tasks x 2 variants x 2 repeats, scripted model, Docker),
run once for the module: every job ends with an ATIF trajectory.json that harbor's validator
passes, and `flower-batch export` writes the Inspect logs that read_eval_log reads back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flower_batch.layout import Home
from tests.batch_fixtures.rig import fb, one_line_error, runtime_image
from tests.flower_batch.export.harbor_check import validate

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("demo") / "home"
    ran = fb(
        "matrix", "examples/jobs.toml", "-j", "2", "--image", runtime_image(), "--fail-under", "0",
        home=home, timeout=900,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return home


def test_every_job_ends_with_a_valid_atif_trajectory(home):
    jobs = Home(home).jobs("demo")
    assert len(jobs) == 8
    paths = [jd.root / "trajectory.json" for jd in jobs]  # written by the runner, not by export
    assert validate(paths) == {str(p): [] for p in paths}
    for jd, path in zip(jobs, paths, strict=True):
        t, record = json.loads(path.read_text()), jd.record()
        calls = [s for s in t["steps"] if s["source"] == "agent"]
        assert len(calls) == record.num_turns
        # Each call priced as the gateway metered it: the calls add up to the job's metered cost.
        assert t["final_metrics"]["extra"]["calls_cost_usd"] == pytest.approx(record.cost_usd)
        assert all(s["metrics"]["cost_usd"] > 0 for s in calls)
        assert t["final_metrics"]["extra"]["status"] == record.status


def test_export_atif_to_a_folder(home, tmp_path):
    proc = fb("export", "demo", "--format", "atif", "--out", tmp_path / "atif", home=home)
    assert proc.returncode == 0, proc.stderr
    assert "8 trajectories from 8 jobs of demo" in proc.stdout
    copies = sorted((tmp_path / "atif").glob("*/trajectory.json"))
    assert len(copies) == 8
    for copy in copies:
        assert json.loads(copy.read_text()) == json.loads(
            (home / "demo" / copy.parent.name / "trajectory.json").read_text()
        )


def test_read_eval_log_reads_the_demos_export(home, tmp_path):
    from inspect_ai.log import read_eval_log  # here: importing it costs every worker ~4 s of CPU

    proc = fb("export", "demo", "--format", "inspect", "--out", tmp_path / "logs", home=home)
    assert proc.returncode == 0, proc.stderr
    logs = [read_eval_log(str(p)) for p in sorted((tmp_path / "logs").glob("*.json"))]
    assert len(logs) == 4  # one per task x variant
    samples = [(log, s) for log in logs for s in log.samples]
    assert len(samples) == 8
    records = {jd.job: jd.record() for jd in Home(home).jobs("demo")}
    for log, sample in samples:
        record = records[sample.metadata["job"]]
        assert (log.eval.task, log.eval.task_args["variant"], sample.epoch) == (
            record.spec.task, record.spec.variant, record.spec.repeat,
        )  # fmt: skip
        assert sample.scores["flower_batch"].value == ("C" if record.status == "passed" else "I")
        assert sample.scores["flower_batch"].metadata["class"] == record.failure_class
    for log in logs:
        passed = sum(1 for s in log.samples if s.scores["flower_batch"].value == "C")
        assert log.results.scores[0].metrics["accuracy"].value == passed / len(log.samples)
    # One transcript: hello's first step reads TASK.md, and the tool's answer follows the call.
    log = next(log for log in logs if log.eval.task == "hello" and log.eval.task_args["variant"] == "careful")
    sample = next(s for s in log.samples if s.epoch == 1)
    read = next(m for m in sample.messages if m.role == "assistant" and m.tool_calls)
    assert read.tool_calls[0].function == "Read" and read.tool_calls[0].arguments["file_path"].endswith(
        "TASK.md"
    )
    answer = sample.messages[sample.messages.index(read) + 1]
    assert answer.role == "tool" and "hello.txt" in answer.text
    (usage,) = sample.model_usage.values()
    assert usage.total_cost == pytest.approx(records[sample.metadata["job"]].cost_usd)


def test_export_says_what_is_wrong_in_one_line(home, tmp_path):
    one_line_error(fb("export", "nope", "--format", "atif", home=home), "no batch 'nope'")
    one_line_error(fb("export", "demo", "--format", "csv", home=home), "--format 'csv'")
    one_line_error(
        fb("export", "demo", "-f", "inspect", "--out", tmp_path / "no" / "such", home=home), "parent folder"
    )
    (tmp_path / "file").write_text("x")
    one_line_error(fb("export", "demo", "-f", "inspect", "--out", tmp_path / "file", home=home), "is a file")
