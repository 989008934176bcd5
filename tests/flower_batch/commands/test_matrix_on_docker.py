"""`flower-batch matrix` end to end on Docker (issue 6): expansion with include/exclude and
repeat, checks, the four outputs agreeing with the job records and manifests, resume after
the orchestrator is SIGKILLed, input changes, --retry-failed / --fresh / --fail-under, and
plain output with no TTY.

The matrix (6 jobs, -j 2, every reply instant) runs once per module; tests that change the
batch work on a copy of its project and home, so each sees the same starting point.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.batch_fixtures.rig import (
    ANSI,
    Job,
    fb,
    fb_start,
    labelled,
    private_home,
    project_copy,
    remove_resources,
    runtime_image,
    sigkill_group,
    wait_for,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

JOBS_TOML = """
[batch]
name = "{name}"

[defaults]
workflow = "flows:${{{{ matrix.variant }}}}"
prompt = "Read TASK.md and do what it asks."
timeout = "2m"
check_timeout = "30s"
memory = "1g"
gateway = {{ mode = "scripted", scenario = "scenarios/quick.toml" }}

[tasks.alpha]
workspace = "tasks/alpha"
check = "grep -qx alpha answer.txt"

[tasks.beta]
workspace = "tasks/beta"
# The model writes "beta": this check fails on purpose, so beta's jobs fail.
check = "grep -qx gamma answer.txt"

[matrix]
variant = ["solo", "duo"]
repeat = 2
exclude = [{{ task = "beta", variant = "duo" }}]
include = [{{ variant = "solo", timeout = "90s" }}]
"""
EXPECTED = {
    "alpha.solo.r1",
    "alpha.solo.r2",
    "alpha.duo.r1",
    "alpha.duo.r2",
    "beta.solo.r1",
    "beta.solo.r2",
}
PROGRESS = re.compile(
    r"^\d\d:\d\d:\d\d (\S+): (queued|running|checking|passed|failed|timeout|error)  \[[a-z0-9 ]+\]$"
)


@dataclass
class Batch:
    name: str
    project: Path
    home: Path
    image: str

    @property
    def jobs_file(self) -> Path:
        return self.project / "jobs.toml"

    @property
    def report(self) -> Path:
        return self.home / self.name / "report"

    def job(self, job_id: str) -> Job:
        return Job(self.home, self.name, job_id)

    def records(self) -> dict[str, dict]:
        return {j: self.job(j).record() for j in EXPECTED}

    def command(self, *flags: str) -> list[str]:
        return ["matrix", str(self.jobs_file), "-j", "2", "--image", self.image, *flags]

    def run(self, *flags: str) -> subprocess.CompletedProcess[str]:
        return fb(*self.command(*flags), home=self.home, cwd=self.project, timeout=240)

    def copy(self, dest: Path) -> Batch:
        """The same batch, project and results in another folder (a private starting point)."""
        shutil.copytree(self.project, dest / "project")
        shutil.copytree(self.home, dest / "home", ignore=shutil.ignore_patterns(".sessions"))
        return Batch(self.name, dest / "project", dest / "home", self.image)


def new_batch(tmp: Path, name: str, image: str) -> Batch:
    project = project_copy(tmp / "project")
    (project / "jobs.toml").write_text(JOBS_TOML.format(name=name))
    return Batch(name, project, tmp / "home", image)


@pytest.fixture(scope="module")
def done(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Batch, subprocess.CompletedProcess[str]]]:
    batch = new_batch(tmp_path_factory.mktemp("matrix"), "mx-done", runtime_image())
    proc = batch.run()
    yield batch, proc
    remove_resources(labelled(batch.name))


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield from private_home(tmp_path)


def finished_at(batch: Batch) -> dict[str, str]:
    return {j: r["finished_at"] for j, r in batch.records().items()}


# -- one run of the matrix ---------------------------------------------------------------------------
def test_the_matrix_expands_include_exclude_and_repeat(done) -> None:
    batch, proc = done
    assert proc.returncode == 1, proc.stderr  # beta's check fails, so not every job passed
    records = batch.records()
    assert set(records) == EXPECTED
    assert {p.name for p in (batch.home / batch.name).iterdir() if (p / "record.json").exists()} == EXPECTED
    for job_id, rec in records.items():
        task, variant, repeat = job_id.split(".")
        assert rec["spec"]["task"] == task and rec["spec"]["variant"] == variant
        assert rec["spec"]["repeat"] == int(repeat[1:]) and rec["attempt"] == 1
        assert rec["spec"]["workflow"] == f"flows:{variant}"
        # include extends every solo combination; the others keep the default
        assert rec["spec"]["timeout_s"] == (90 if variant == "solo" else 120)
        assert rec["image_id"] == batch.image and rec["gateway_mode"] == "scripted"
        # each job ran once, in its own container, with its own fresh workspace copy
        assert batch.job(job_id).container_log().count("--- container") == 1
        assert (batch.job(job_id).root / "workspace" / "answer.txt").read_text() == f"{task}\n"
    steps = {j: [s["name"] for s in r["steps"]] for j, r in records.items()}
    assert steps["alpha.duo.r1"] == ["do", "review"] and steps["alpha.solo.r1"] == ["do"]
    assert not labelled(batch.name), labelled(batch.name).describe()


def test_a_failing_check_marks_the_job_failed(done) -> None:
    batch, _ = done
    for job_id, rec in batch.records().items():
        if job_id.startswith("alpha."):
            assert rec["status"] == "passed" and rec["check_exit"] == 0, rec
            continue
        assert rec["status"] == "failed" and rec["workflow_ok"] is True and rec["check_exit"] == 1
        assert "check" in rec["reason"]
        check_log = (batch.job(job_id).root / "logs" / "check.log").read_text()
        assert "grep -qx gamma answer.txt" in check_log and "[exit 1]" in check_log


def test_table_results_junit_and_html_agree_with_the_records(done) -> None:
    batch, proc = done
    records = batch.records()
    doc = json.loads((batch.report / "results.json").read_text())
    assert doc["batch"] == batch.name and doc["image_id"] == batch.image
    assert doc["gateway"]["modes"] == ["scripted"]
    assert {j["id"]: j["status"] for j in doc["jobs"]} == {j: r["status"] for j, r in records.items()}
    for entry in doc["jobs"]:
        rec = records[entry["id"]]
        rows = batch.job(entry["id"]).manifest()
        assert [r["step"] for r in rows] == [s["name"] for s in rec["steps"]]
        assert rec["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in rows))
        assert rec["num_turns"] == sum(r["num_turns"] for r in rows)
        assert (
            entry["outcome"]["cost_usd"] == rec["cost_usd"]
            and entry["outcome"]["num_turns"] == rec["num_turns"]
        )
    cells = {(c["task"], c["variant"]): (c["passed"], c["n"]) for c in doc["cells"]}
    assert cells == {("alpha", "solo"): (2, 2), ("alpha", "duo"): (2, 2), ("beta", "solo"): (0, 2)}
    assert (doc["summary"]["passed"], doc["summary"]["n"]) == (4, 6)

    suites = ET.parse(batch.report / "junit.xml").getroot()
    cases = {c.get("name"): c for c in suites.iter("testcase")}
    assert set(cases) == EXPECTED
    for job_id, case in cases.items():
        assert case.get("classname") == job_id.split(".")[0]
        failure = case.find("failure")
        assert (failure is not None) == (records[job_id]["status"] == "failed")
    assert suites.get("tests") == "6" and suites.get("failures") == "2" and suites.get("errors") == "0"

    html = (batch.report / "report.html").read_text()
    embedded = re.search(r'<script type="application/json" id="results-data">(.*?)</script>', html, re.S)
    assert embedded and json.loads(embedded.group(1)) == doc
    assert "scripted" in html and "http://" not in html.replace("http://www.w3.org", "")  # self-contained

    # the terminal table: the same cells, as plain text
    table = proc.stdout
    assert "model: scripted" in table and "\x1b[" not in table
    alpha = next(line for line in table.splitlines() if line.strip("│ ").startswith("alpha"))
    beta = next(line for line in table.splitlines() if line.strip("│ ").startswith("beta"))
    assert alpha.count("2/2") == 2 and "0/2" in beta
    assert "4/6 passed" in proc.stderr

    # `report` regenerates the same documents from the records
    again = fb("report", batch.name, home=batch.home)
    assert again.returncode == 0, again.stderr
    regenerated = json.loads((batch.report / "results.json").read_text())
    assert {**regenerated, "generated_at": None} == {**doc, "generated_at": None}


def test_no_tty_output_is_plain_lines(done) -> None:
    _, proc = done
    assert not ANSI.search(proc.stdout + proc.stderr)
    progress = [line for line in proc.stderr.splitlines() if PROGRESS.match(line)]
    seen = Counter((m.group(1), m.group(2)) for line in progress if (m := PROGRESS.match(line)))
    for job_id in EXPECTED:
        assert seen[(job_id, "running")] == 1, progress
        assert seen[(job_id, "passed" if job_id.startswith("alpha") else "failed")] == 1, progress


# -- running it again ---------------------------------------------------------------------------------
def test_the_same_command_again_runs_nothing_and_fail_under_sets_the_exit_code(done) -> None:
    batch, _ = done
    before = finished_at(batch)
    again = batch.run()
    assert again.returncode == 1 and "6 kept, 0 to run" in again.stderr
    assert finished_at(batch) == before
    assert batch.run("--fail-under", "0.6").returncode == 0  # 4/6 = 0.67
    assert batch.run("--fail-under", "0.7").returncode == 1
    assert batch.run("--fail-under", "0").returncode == 0
    bad = batch.run("--fail-under", "2")
    assert bad.returncode == 2 and "--fail-under" in bad.stderr
    assert finished_at(batch) == before


def test_retry_failed_reruns_only_the_failed_jobs(done, tmp_path: Path) -> None:
    batch = done[0].copy(tmp_path)
    before = finished_at(batch)
    proc = batch.run("--retry-failed")
    assert proc.returncode == 1, proc.stderr
    assert "4 kept, 2 to run" in proc.stderr
    after = batch.records()
    rerun = {j for j in EXPECTED if after[j]["finished_at"] != before[j]}
    assert rerun == {"beta.solo.r1", "beta.solo.r2"}
    assert all(after[j]["attempt"] == (2 if j in rerun else 1) for j in EXPECTED)
    assert not labelled(batch.name), labelled(batch.name).describe()


def test_editing_one_tasks_prompt_reruns_only_its_jobs(done, tmp_path: Path) -> None:
    batch = done[0].copy(tmp_path)
    before = finished_at(batch)
    text = batch.jobs_file.read_text().replace(
        'workspace = "tasks/beta"',
        'workspace = "tasks/beta"\nprompt = "Read TASK.md and do what it asks, carefully."',
    )
    batch.jobs_file.write_text(text)
    plan = fb(*batch.command("--dry-run"), home=batch.home, cwd=batch.project)
    assert plan.returncode == 0
    assert sorted(line.split()[1] for line in plan.stdout.splitlines() if line.startswith("run ")) == [
        "beta.solo.r1",
        "beta.solo.r2",
    ]
    assert "prompt" in plan.stdout
    proc = batch.run()
    assert proc.returncode == 1, proc.stderr
    after = batch.records()
    assert {j for j in EXPECTED if after[j]["finished_at"] != before[j]} == {"beta.solo.r1", "beta.solo.r2"}
    assert after["beta.solo.r1"]["spec"]["prompt"].endswith("carefully.")


def test_fresh_reruns_every_job(done, tmp_path: Path) -> None:
    batch = done[0].copy(tmp_path)
    before = finished_at(batch)
    proc = batch.run("--fresh")
    assert proc.returncode == 1, proc.stderr
    assert "0 kept, 6 to run" in proc.stderr
    after = batch.records()
    assert all(after[j]["finished_at"] != before[j] and after[j]["attempt"] == 2 for j in EXPECTED)
    assert all(batch.job(j).container_log().count("--- container") == 1 for j in EXPECTED)
    assert not labelled(batch.name), labelled(batch.name).describe()


# -- the orchestrator is SIGKILLed mid-matrix ---------------------------------------------------------------
def test_sigkill_mid_matrix_then_the_same_command_runs_only_unfinished_jobs(
    home: Path, tmp_path: Path
) -> None:
    batch = new_batch(tmp_path, "mx-killed", runtime_image())
    assert batch.home == home  # the fixture's: whatever this test leaks is removed after it
    first = fb_start(*batch.command(), home=home, cwd=batch.project, log=tmp_path / "first.out")

    def statuses() -> dict[str, str | None]:
        return {j: batch.job(j).status() for j in EXPECTED}

    def mid_matrix() -> bool:
        now = statuses()
        return any(s in ("passed", "failed") for s in now.values()) and "running" in now.values()

    wait_for("a finished job and a running one", mid_matrix, timeout=120, every=0.05)
    sigkill_group(first)
    at_kill = statuses()
    finished = {j for j, s in at_kill.items() if s in ("passed", "failed")}
    unfinished = set(EXPECTED) - finished
    assert finished and unfinished, at_kill
    stamps = {j: batch.job(j).record()["finished_at"] for j in finished}
    assert labelled(batch.name), "the killed orchestrator should have left its containers behind"
    # its unfinished jobs are not shown as running/queued forever: their orchestrator is gone
    shown = {
        r["job"]: r["status"] for r in json.loads(fb("ls", "--json", "-b", batch.name, home=home).stdout)
    }
    derived = {"running": "orphaned", "queued": "never-started"}
    assert {j: shown[j] for j in unfinished} == {j: derived[str(at_kill[j])] for j in unfinished}, shown

    second = batch.run()
    assert second.returncode == 1, second.stderr
    assert f"{len(finished)} kept, {len(unfinished)} to run" in second.stderr
    assert "left by an earlier run" in second.stderr
    records = batch.records()
    # finished jobs were kept as they were; the others ran exactly once more
    for job_id in finished:
        assert records[job_id]["finished_at"] == stamps[job_id] and records[job_id]["attempt"] == 1
    for job_id in unfinished:
        assert records[job_id]["status"] in ("passed", "failed") and records[job_id]["attempt"] == 2
    expected_status = {j: "passed" if j.startswith("alpha") else "failed" for j in EXPECTED}
    assert {j: r["status"] for j, r in records.items()} == expected_status
    repaired = {
        r["job"]: r["status"] for r in json.loads(fb("ls", "--json", "-b", batch.name, home=home).stdout)
    }
    assert repaired == expected_status  # the re-run repaired the orphaned records
    # no duplicates: one run per job in its manifest and its log, one entry per job in the results
    for job_id in EXPECTED:
        job = batch.job(job_id)
        assert len({row["run"] for row in job.manifest()}) == 1, job_id
        assert job.container_log().count("--- container") == 1, job_id
    doc = json.loads((batch.report / "results.json").read_text())
    assert sorted(j["id"] for j in doc["jobs"]) == sorted(EXPECTED)
    # and nothing with our labels is left: the killed run's containers were reaped
    assert not labelled(batch.name), labelled(batch.name).describe()
    assert not list((home / ".sessions").glob("*.lock"))
