"""The viewer and the report's diff summaries on a batch that `flower-batch matrix` ran in Docker:
the container's layout (/workspace, /runs, the SDK's project key), a resumed step split from the
step it continues, the task's tool calls and results, and the workspace diff."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower_batch.layout import Home
from flower_batch.view.server import ViewServer
from tests.batch_fixtures.rig import remove_leftovers, runtime_image, sessions_of
from tests.flower_batch.commands.test_matrix_on_docker import EXPECTED, Batch, new_batch

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Batch, subprocess.CompletedProcess[str]]]:
    batch = new_batch(tmp_path_factory.mktemp("view-matrix"), "mx-view", runtime_image())
    proc = batch.run()
    seen = sessions_of(batch.home, batch.name)
    yield batch, proc
    remove_leftovers(batch.home, batch.name, seen)


@pytest.fixture(scope="module")
def api(ran) -> Iterator[tuple[Batch, ViewServer]]:
    batch, _ = ran
    server = ViewServer(Home(batch.home), 0)
    server.start_in_thread()
    yield batch, server
    server.shutdown()
    server.server_close()


def get(server: ViewServer, path: str) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request("GET", path)
    resp = conn.getresponse()
    data = json.loads(resp.read())
    conn.close()
    assert resp.status == 200, data
    return data


def test_the_job_list_is_the_records(api):
    batch, server = api
    listed = get(server, f"/api/jobs?batch={batch.name}")
    assert {j["id"]: j["status"] for j in listed["jobs"]} == {
        j: r["status"] for j, r in batch.records().items()
    }
    assert set(listed["counts"]) == {"passed", "failed"}
    duo = next(j for j in listed["jobs"] if j["id"] == "alpha.duo.r1")
    assert (
        duo["variant"] == "duo"
        and duo["matrix"] == "task=alpha variant=duo"
        and duo["cost_usd"]
        and duo["num_turns"]
    )


def test_a_resumed_step_shows_only_its_own_messages(api):
    batch, server = api
    detail = get(server, f"/api/job?batch={batch.name}&job=alpha.duo.r1")
    steps = detail["trajectory"]["steps"]
    assert [s["name"] for s in steps] == ["do", "review"] and detail["trajectory"]["problem"] is None
    do, review = (s["sessions"][0]["messages"] for s in steps)
    calls = [m for m in do if m["kind"] == "tool_use"]
    assert [c["name"] for c in calls] == ["Read", "Write"]
    assert "/workspace/TASK.md" in calls[0]["input"] and "ALPHA-TASK" in calls[0]["result"]["text"]
    assert '"content": "alpha\\n"' in calls[1]["input"] and calls[1]["result"]["text"]
    assert steps[1]["resumes_step"] == "do"
    # the prompt, after the limits flower tells every session (a <system-reminder> block)
    reminder, _, prompt = review[0]["text"].rpartition("</system-reminder>")
    assert review[0]["kind"] == "user" and prompt.strip().startswith("Review answer.txt")
    assert reminder.startswith("<system-reminder>") and "[flower]" in reminder
    assert not any(m["kind"] == "tool_use" for m in review) and "CHECKED" in review[-1]["text"]
    for step in steps:
        assert sum(s["tokens"]["calls"] for s in step["sessions"]) == step["num_turns"]


def test_workspace_diff_and_the_reports_summaries(api):
    batch, server = api
    d = get(server, f"/api/diff?batch={batch.name}&job=alpha.solo.r1")
    answer = next(f for f in d["files"] if f["path"] == "answer.txt")
    assert d["available"] and answer["kind"] == "added" and answer["diff"].endswith("+alpha\n")
    assert not any(f["path"] == "TASK.md" for f in d["files"])  # the task's own file is untouched
    doc = json.loads((batch.report / "results.json").read_text())
    diffs = {j["id"]: j["workspace_diff"] for j in doc["jobs"]}
    assert set(diffs) == EXPECTED and all(x["available"] and x["added"] >= 1 for x in diffs.values())
    html = (batch.report / "report.html").read_text()
    assert len(re.findall(r'<span class="diffsum" data-diff="ok"', html)) == len(EXPECTED)


def test_the_viewer_wrote_nothing(api):
    batch, server = api
    before = {p: p.stat().st_mtime_ns for p in Path(batch.home, batch.name).rglob("*") if p.is_file()}
    for job in sorted(EXPECTED):
        get(server, f"/api/job?batch={batch.name}&job={job}")
        get(server, f"/api/diff?batch={batch.name}&job={job}")
    after = {p: p.stat().st_mtime_ns for p in Path(batch.home, batch.name).rglob("*") if p.is_file()}
    assert after == before
