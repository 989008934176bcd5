"""Real causes and continuity in job records, on Docker (issue 11.3, 11.4; issue 14.2).

One matrix of four jobs, each ending for a different reason (an import that raises, a missing
attribute, the job's memory limit, a refused API key); then one persistent job, copied into one
folder per way its continuity can break, each woken once. Every case asserts the record's
reason (or continuity) carries the real line, and what `wake` prints.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from lxml import etree

from tests.batch_fixtures.rig import (
    PROJECT,
    Job,
    fb,
    private_home,
    project_copy,
    remove_leftovers,
    runtime_image,
    sessions_of,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROMPT = "Read TASK.md and do what it asks."
JOBS_TOML = """
[batch]
name = "{name}"

[defaults]
prompt = "Read TASK.md and do what it asks."
timeout = "2m"
memory = "1g"
gateway = {{ mode = "scripted", scenario = "scenarios/quick.toml" }}

[tasks.boom]
workspace = "tasks/alpha"
workflow = "boom.py:main"
env = {{ CZ_IN_JOB = "1" }}

[tasks.noattr]
workspace = "tasks/alpha"
workflow = "late.py:nope"
env = {{ CZ_IN_JOB = "1" }}

[tasks.hog]
workspace = "tasks/alpha"
workflow = "hog.py:main"
memory = "96m"
env = {{ CZ_IN_JOB = "1" }}

[tasks.refused]
workspace = "tasks/alpha"
workflow = "flows:solo"
gateway = {{ mode = "scripted", scenario = "scenarios/refuse.toml" }}
"""


# These modules import fine in the pre-flight (which passes no job env) and break only in the job:
# what a record must explain is a failure that got past every check.
ONE_STEP = (
    "import os\nfrom flower import AgentSpec, Step, Workflow\n"
    'FLOW = Workflow([Step("do", AgentSpec("w", instructions="Do it."), "hi")])\n'
)


@pytest.fixture(scope="module")
def causes(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, Path, subprocess.CompletedProcess[str]]]:
    tmp = tmp_path_factory.mktemp("causes")
    project = project_copy(tmp / "project")
    (project / "boom.py").write_text(
        ONE_STEP + 'if os.environ.get("CZ_IN_JOB"):\n    raise RuntimeError("no flows today")\nmain = FLOW\n'
    )
    (project / "late.py").write_text(ONE_STEP + 'if not os.environ.get("CZ_IN_JOB"):\n    nope = FLOW\n')
    (project / "hog.py").write_text(
        ONE_STEP + 'if os.environ.get("CZ_IN_JOB"):\n'
        "    HOARD = bytearray(1 << 30)  # far past the job's 96m\nmain = FLOW\n"
    )
    (project / "scenarios" / "refuse.toml").write_text('[[rules]]\nname = "refuse"\nerror = 401\n')
    (project / "jobs.toml").write_text(JOBS_TOML.format(name="cz-matrix"))
    home = tmp / "home"
    proc = fb(
        "matrix",
        project / "jobs.toml",
        "-j",
        "2",
        "--image",
        runtime_image(),
        "--infra-retries",
        "0",
        home=home,
        cwd=project,
        timeout=300,
    )
    seen = sessions_of(home, "cz-matrix")
    yield project, home, proc
    remove_leftovers(home, "cz-matrix", seen)


def _record(home: Path, job_id: str) -> dict:
    return Job(home, "cz-matrix", job_id).record()


def test_an_import_failure_is_the_records_reason(causes) -> None:
    _, home, proc = causes
    rec = _record(home, "boom.r1")
    assert rec["status"] == "failed" and rec["class"] == "agent", rec
    assert "importing boom.py failed: RuntimeError: no flows today" in rec["reason"], rec["reason"]


def test_a_missing_attribute_is_the_records_reason(causes) -> None:
    rec = _record(causes[1], "noattr.r1")
    assert rec["status"] == "failed" and rec["class"] == "agent"
    assert rec["reason"].endswith("has no attribute 'nope'"), rec["reason"]


def test_out_of_memory_says_so(causes) -> None:
    rec = _record(causes[1], "hog.r1")
    assert rec["exit_code"] == 137 and rec["status"] == "failed" and rec["class"] == "agent", rec
    assert rec["reason"] == (
        "killed: out of memory (the job's memory limit 96m was reached; Docker reports OOMKilled)"
    )


def test_a_refused_key_is_an_infrastructure_error_with_the_apis_line(causes) -> None:
    rec = _record(causes[1], "refused.r1")
    assert rec["status"] == "error" and rec["class"] == "infrastructure", rec
    assert rec["reason"].startswith("step do: API error 401: "), rec["reason"]


def test_classes_are_counted_apart_and_infrastructure_exits_3(causes) -> None:
    _, home, proc = causes
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "not passed: agent 3 · infrastructure 1" in proc.stderr
    report = home / "cz-matrix" / "report"
    doc = json.loads((report / "results.json").read_text())
    assert doc["classes"] == {
        "passed": 0,
        "agent": 3,
        "verifier": 0,
        "infrastructure": 1,
        "timeout": 0,
        "budget": 0,
        "disk": 0,
        "paused": 0,
        "pending": 0,
    }
    root = ET.parse(report / "junit.xml").getroot()
    assert (root.get("failures"), root.get("errors")) == ("3", "1")
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["refused.r1"].find("error").get("type") == "infrastructure"
    assert "no flows today" in cases["boom.r1"].find("failure").get("message")
    schema = etree.XMLSchema(
        etree.parse(str(Path(__file__).resolve().parents[3] / "tests" / "schemas" / "junit.xsd"))
    )
    assert schema.validate(etree.parse(str(report / "junit.xml"))), schema.error_log


# -- continuity: one persistent job, copied once per way its continuity can break -------------------
@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield from private_home(tmp_path)


def _copy_job(home: Path, source: str, name: str) -> Path:
    """The job folder under another name (as a user copying it would, ids rewritten)."""
    src, dest = home / "adhoc" / source, home / "adhoc" / name
    shutil.copytree(src, dest)
    record = json.loads((dest / "record.json").read_text())
    record["job_id"] = name
    record["spec"]["id"] = name
    (dest / "record.json").write_text(json.dumps(record))
    return dest / "runs"


def _damage_lineage_missing(runs: Path) -> None:
    (runs / "lineage.json").unlink()


def _damage_lineage_truncated(runs: Path) -> None:
    text = (runs / "lineage.json").read_text()
    (runs / "lineage.json").write_text(text[: len(text) // 2])


def _damage_unknown_session(runs: Path) -> None:
    data = json.loads((runs / "lineage.json").read_text())
    data["steps"]["do"] = "00000000-0000-4000-8000-000000000000"
    (runs / "lineage.json").write_text(json.dumps(data))


def _damage_store_gone(runs: Path) -> None:
    for path in runs.glob("sessions.db*"):
        path.unlink()


def _damage_store_malformed(runs: Path) -> None:
    for path in runs.glob("sessions.db-*"):
        path.unlink()
    db = runs / "sessions.db"
    db.write_bytes(db.read_bytes()[:100] + b"\x00garbage" * 64)


CASES = [
    ("lost", _damage_lineage_missing, "step do: started fresh: lineage.json missing"),
    ("cut", _damage_lineage_truncated, "step do: started fresh: lineage.json unreadable: "),
    ("stranger", _damage_unknown_session, "step do: started fresh: session 00000000… is not in sessions.db"),
    (
        "nostore",
        _damage_store_gone,
        "is not in sessions.db (sessions.db was missing: a new store was started)",
    ),
]


def test_every_way_continuity_breaks_is_in_the_record_and_the_wake_output(home: Path, tmp_path: Path) -> None:
    first = fb(
        "run",
        PROJECT / "tasks" / "alpha",
        "-f",
        f"{PROJECT}/flows.py:solo",
        "--prompt",
        PROMPT,
        "--scenario",
        PROJECT / "scenarios" / "quick.toml",
        "--name",
        "origin",
        "--persistent",
        "--image",
        runtime_image(),
        home=home,
        timeout=180,
    )
    assert first.returncode == 0, first.stderr
    origin = Job(home, "adhoc", "origin").record()
    assert origin["continuity"] == [
        {"step": "do", "continued": False, "session": None, "reason": "first run: nothing to continue"}
    ]
    for name, damage, _ in CASES:
        damage(_copy_job(home, "origin", name))
    for name, _, expected in CASES:
        woken = fb("wake", name, home=home, timeout=180)
        assert woken.returncode == 0, (name, woken.stderr)
        rec = Job(home, "adhoc", name).record()
        (entry,) = rec["continuity"]
        assert entry["step"] == "do" and entry["continued"] is False, (name, entry)
        assert f"step do: started fresh: {entry['reason']}" in woken.stderr, (name, woken.stderr)
        assert expected in woken.stderr, (name, woken.stderr)
        shown = fb("show", name, home=home)
        assert " ".join(expected.split()) in " ".join(shown.stdout.split()), shown.stdout


def test_a_malformed_sessions_db_is_the_records_reason(home: Path) -> None:
    first = fb(
        "run",
        PROJECT / "tasks" / "alpha",
        "-f",
        f"{PROJECT}/flows.py:solo",
        "--prompt",
        PROMPT,
        "--scenario",
        PROJECT / "scenarios" / "quick.toml",
        "--name",
        "broken",
        "--persistent",
        "--image",
        runtime_image(),
        home=home,
        timeout=180,
    )
    assert first.returncode == 0, first.stderr
    _damage_store_malformed(home / "adhoc" / "broken" / "runs")
    woken = fb("wake", "broken", home=home, timeout=180)
    rec = Job(home, "adhoc", "broken").record()
    assert rec["status"] == "error" and rec["class"] == "infrastructure", rec
    assert "sessions.db cannot be opened: " in rec["reason"], rec["reason"]
    assert any(
        text in rec["reason"] for text in ("database disk image is malformed", "file is not a database")
    )
    assert woken.returncode == 3 and rec["reason"] in woken.stderr.replace("\n", " ")
    assert "continuity unknown: flower did not get as far as its first step" in woken.stderr
