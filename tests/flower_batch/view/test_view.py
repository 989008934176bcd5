"""The viewer's data: trajectories read from real runs (the starter flow with its judge rounds and
subagents; a handoff), read-only and tolerant of a writer; the job index; the HTTP API; the command."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from flower.catalogue.names import NOTES_DIR, WORKBENCH_DIR
from flower.context.handoff import doc_path
from flower_batch.layout import Home
from flower_batch.transcripts.steps import job_trajectory, step_kind
from flower_batch.view.index import RecordIndex, select
from flower_batch.view.server import ViewServer
from tests.hostile_fixtures import SECRET, outside_secret
from tests.view_fixtures import XSS, real_home, write_job

REPO = Path(__file__).resolve().parents[3]
FLOWER_BATCH = REPO / ".venv" / "bin" / "flower-batch"


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return real_home(tmp_path_factory.mktemp("view"))


def trajectory(home: Path, job: str) -> dict:
    jd = home / "nightly" / job
    return job_trajectory(jd / "runs", jd / "workspace")


def test_step_kinds():
    assert step_kind("干活·判定#2") == {"kind": "judge", "number": 2, "base": "干活"}
    assert step_kind("干活#round3") == {"kind": "round", "number": 3, "base": "干活"}
    assert step_kind("look#retry1") == {"kind": "retry", "number": 1, "base": "look"}
    assert step_kind("确认需求")["kind"] == "step"


@pytest.mark.slow
def test_starter_run_steps_rounds_judges_subagents_and_tokens(home):
    t = trajectory(home, "hello-base-1")
    assert t["problem"] is None and t["unlisted_sessions"] == []
    names = [s["name"] for s in t["steps"]]
    assert names == ["确认需求", "设定目标", "干活", "干活·判定#1", "干活#round2", "干活·判定#2"]
    steps = {s["name"]: s for s in t["steps"]}
    assert [steps[n]["number"] for n in ("干活·判定#1", "干活·判定#2")] == [1, 2]
    # The human question is a tool call with its (unanswered) result.
    ask = next(m for m in steps["确认需求"]["sessions"][0]["messages"] if m["kind"] == "tool_use")
    assert ask["name"] == "mcp__human__ask" and "hello.txt" in ask["input"] and ask["result"]["text"]
    # Round 2 resumes the work session; the shared transcript is split at the row's start.
    work, round2 = steps["干活"]["sessions"][0], steps["干活#round2"]["sessions"][0]
    assert work["session_id"] == round2["session_id"] and steps["干活#round2"]["resumes_step"] == "干活"
    assert work["messages"][0]["text"].startswith("照这份需求做")
    assert round2["messages"][0]["text"].startswith("独立判定者检查了目标")
    assert not any("照这份需求做" in (m.get("text") or "") for m in round2["messages"])
    # Each round's Agent call carries its own subagent, whose Write and result are there.
    for session, content in ((work, "hello\\n"), (round2, "hi\\n")):
        agent = next(m for m in session["messages"] if m["kind"] == "tool_use" and m["name"] == "Agent")
        assert "Async agent launched" in agent["result"]["text"]
        sub = agent["subagent"]
        assert sub["agent_type"] == "coder" and sub["finished"]
        write = next(m for m in sub["messages"] if m["kind"] == "tool_use")
        assert write["name"] == "Write" and content in write["input"] and write["result"]["text"]
    # The judge read the file: tool call and the file's content as its result.
    read = next(m for m in steps["干活·判定#1"]["sessions"][0]["messages"] if m["kind"] == "tool_use")
    assert read["name"] == "Read" and "hello.txt" in read["input"] and "hello" in read["result"]["text"]
    # A response is counted once (the CLI writes one entry per content block): main-thread calls
    # equal the turns the CLI itself reported for the step.
    rows = json.loads((home / "nightly" / "hello-base-1" / "runs" / "manifest.json").read_text())
    for row, step in zip(rows, t["steps"], strict=True):
        main = sum(s["tokens"]["calls"] for s in step["sessions"])
        assert main == row["num_turns"], step["name"]
        assert step["tokens"]["input_tokens"] > 0 and step["cost_usd"] == row["cost_usd"]
    assert steps["干活"]["tokens"]["calls"] == steps["干活"]["num_turns"] + 2  # + the subagent's two calls


@pytest.mark.slow
def test_handoff_shows_retired_session_document_and_successor(home):
    t = trajectory(home, "build-handoff-1")
    step = t["steps"][0]
    assert step["name"] == "干活" and [s["role"] for s in step["sessions"]] == ["retired", "current"]
    retired, current = step["sessions"]
    assert retired["session_id"] != current["session_id"]
    assert any("现在写交接文档" in (m.get("text") or "") for m in retired["messages"])
    assert current["messages"][0]["text"].startswith("你在接手一个进行中的任务")
    assert (
        step["handoff"]["doc"] == ".flower/notes/交接-干活.md" and "FINAL-BANANA" in step["handoff"]["text"]
    )
    read = next(m for m in t["steps"][1]["sessions"][0]["messages"] if m["kind"] == "tool_use")
    assert XSS in read["result"]["text"]  # kept verbatim as data; the page escapes it


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size) for p in root.rglob("*")}


@pytest.mark.slow
def test_the_viewer_never_writes_in_the_home(home):
    before = _snapshot(home)
    server = ViewServer(Home(home), 0)
    server.start_in_thread()
    try:
        for path in ["/", "/app.js", "/api/batches", "/api/jobs?batch=nightly"] + [
            f"/api/{kind}?batch=nightly&job={job}"
            for job in ("hello-base-1", "build-handoff-1", "hello-fast-1")
            for kind in ("job", "diff")
        ]:
            status, _ = get(server, path)
            assert status == 200, path
    finally:
        server.shutdown()
        server.server_close()
    assert _snapshot(home) == before  # not even SQLite's -wal/-shm


@pytest.mark.slow
def test_reads_while_a_writer_holds_the_database(home, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(home / "nightly" / "hello-base-1" / "runs", runs)
    writer = sqlite3.connect(runs / "sessions.db", isolation_level=None, timeout=5)
    writer.execute("PRAGMA journal_mode = WAL")
    key, payload = writer.execute(
        "SELECT store_key, payload FROM entries WHERE store_key NOT LIKE '%/subagents/%' "
        "ORDER BY seq DESC LIMIT 1"
    ).fetchone()
    entry = json.loads(payload)
    entry["uuid"], entry["message"] = (
        "new-entry",
        {**entry["message"], "id": "msg-new", "content": [{"type": "text", "text": "WRITTEN-LATER"}]},
    )
    writer.execute("BEGIN IMMEDIATE")
    seq = writer.execute("SELECT max(seq) + 1 FROM entries WHERE store_key = ?", (key,)).fetchone()[0]
    writer.execute(
        "INSERT INTO entries (store_key, seq, uid, payload) VALUES (?, ?, ?, ?)",
        (key, seq, "new-entry", json.dumps(entry)),
    )
    started = time.monotonic()
    during = job_trajectory(runs, tmp_path)
    assert time.monotonic() - started < 5
    assert during["problem"] is None and "WRITTEN-LATER" not in json.dumps(during)  # the committed snapshot
    writer.execute("COMMIT")
    after = job_trajectory(runs, tmp_path)
    assert "WRITTEN-LATER" in json.dumps(after)
    writer.close()


@pytest.mark.slow
def test_a_session_not_in_the_manifest_yet_is_the_running_step(home, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(home / "nightly" / "hello-base-1" / "runs", runs)
    rows = json.loads((runs / "manifest.json").read_text())
    (runs / "manifest.json").write_text(json.dumps(rows[:-1]))  # the last judge has not ended yet
    t = job_trajectory(runs, tmp_path)
    assert [s["session_id"] for s in t["unlisted_sessions"]] == [rows[-1]["session_id"]]
    assert any(m["kind"] == "tool_use" and m["name"] == "Read" for m in t["unlisted_sessions"][0]["messages"])


def test_no_run_yet_and_a_corrupt_database(tmp_path):
    assert job_trajectory(tmp_path / "runs", tmp_path) == {
        "steps": [],
        "unlisted_sessions": [],
        "problem": None,
    }
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "sessions.db").write_bytes(b"not sqlite at all" * 100)
    t = job_trajectory(tmp_path / "runs", tmp_path)
    assert t["steps"] == [] and "sessions.db is not readable" in t["problem"]


def test_index_filters_pages_and_notices_changes(tmp_path):
    for i in range(30):
        write_job(
            tmp_path,
            "b",
            f"t-{'fast' if i % 3 else 'slow'}-{i}",
            "failed" if i % 5 == 0 else "passed",
            variant="fast" if i % 3 else "slow",
        )
    (tmp_path / "b" / "broken").mkdir()
    (tmp_path / "b" / "broken" / "record.json").write_text("{not json")
    index = RecordIndex(tmp_path)
    rows, version = index.rows("b")
    assert len(rows) == 31
    page = select(rows, status="failed", text="", limit=4)
    assert (
        page["matched"] == 6 and len(page["jobs"]) == 4 and all(j["status"] == "failed" for j in page["jobs"])
    )
    assert page["counts"] == {"failed": 6, "passed": 24, "unreadable": 1}
    assert select(rows, text="slow failed")["matched"] == sum(
        1 for i in range(30) if i % 3 == 0 and i % 5 == 0
    )
    assert select(rows, offset=28, limit=10)["jobs"][-1]["id"] == rows[-1]["id"]
    assert "search" not in page["jobs"][0]
    assert next(r for r in rows if r["id"] == "broken")["status"] == "unreadable"
    assert index.rows("b")[1] == version  # nothing changed
    write_job(tmp_path, "b", "t-fast-1", "running", variant="fast")
    rows2, version2 = index.rows("b")
    assert version2 != version and next(r for r in rows2 if r["id"] == "t-fast-1")["status"] == "running"
    assert [b["name"] for b in index.batches()] == ["b"] and index.batches()[0]["jobs"] == 31


def get(server: ViewServer, path: str, host: str | None = None) -> tuple[int, dict | str]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("GET", path, headers={"Host": host or f"127.0.0.1:{server.port}"})
    resp = conn.getresponse()
    body = resp.read().decode()
    conn.close()
    kind = resp.getheader("Content-Type") or ""
    return resp.status, json.loads(body) if kind.startswith("application/json") else body


def test_api_refuses_other_hosts_and_bad_names(tmp_path):
    write_job(tmp_path, "b", "j1", "running")
    server = ViewServer(Home(tmp_path), 0)
    server.start_in_thread()
    try:
        assert server.server_address[0] == "127.0.0.1"
        assert get(server, "/api/batches", host="evil.example:80")[0] == 403  # DNS rebinding
        status, body = get(server, "/api/jobs?batch=../etc")
        assert status == 400 and "batch name '../etc' is not usable" in body["error"]  # type: ignore[index]
        assert get(server, "/api/jobs?batch=nosuch")[0] == 404
        assert get(server, "/api/job?batch=b&job=nosuch")[0] == 404
        assert get(server, "/api/job?batch=b")[0] == 400
        status, detail = get(server, "/api/job?batch=b&job=j1")
        assert status == 200 and detail["record"]["status"] == "running"  # type: ignore[index]
        version = detail["version"]  # type: ignore[index]
        assert get(server, f"/api/job?batch=b&job=j1&since={version}")[1] == {
            "version": version,
            "unchanged": True,
        }
        time.sleep(0.01)
        write_job(tmp_path, "b", "j1", "passed")
        changed = get(server, f"/api/job?batch=b&job=j1&since={version}")[1]
        assert changed["record"]["status"] == "passed"  # type: ignore[index]
    finally:
        server.shutdown()
        server.server_close()


def test_view_command_rejects_an_unknown_batch(tmp_path):
    proc = subprocess.run(
        [str(FLOWER_BATCH), "view", "nosuch", "--home", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"flower-batch: no batch nosuch under {tmp_path} (see `flower-batch ls`)"
    ]
    assert list(tmp_path.iterdir()) == []
    proc = subprocess.run(
        [str(FLOWER_BATCH), "view", "--home", str(tmp_path), "--port", "70000"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "flower-batch: --port 70000: give a port between 1 and 65535, or 0 for any free port"
    )


@pytest.mark.slow
def test_view_command_serves_on_loopback(tmp_path):
    write_job(tmp_path, "b", "j1", "passed")
    proc = subprocess.Popen(
        [str(FLOWER_BATCH), "view", "b", "--home", str(tmp_path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("flower-batch view: http://127.0.0.1:") and "#batch=b" in line
        port = int(line.split("127.0.0.1:")[1].split("/")[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/api/jobs?batch=b")
        data = json.loads(conn.getresponse().read())
        assert [j["id"] for j in data["jobs"]] == ["j1"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _evil_job(home: Path, job: str, secret: Path) -> Path:
    """A job whose files point out of it: handoff documents, the log and sessions.db are symlinks."""
    root = write_job(home, "b", job, "failed")
    runs, notes = root / "runs", root / "workspace" / WORKBENCH_DIR / NOTES_DIR
    runs.mkdir()
    notes.mkdir(parents=True)
    (root / "logs").mkdir()
    rows = [
        {"step": "work", "session_id": "s2", "retired": ["s1"], "ok": False},
        {"step": "other", "session_id": "s4", "retired": ["s3"], "ok": False},
    ]
    (runs / "manifest.json").write_text(json.dumps(rows))
    doc_path(notes, "work").symlink_to(secret)
    doc_path(notes, "other").symlink_to("/etc/passwd")
    (root / "logs" / "container.log").symlink_to(secret)
    outside_db = secret.parent / "other.db"
    db = sqlite3.connect(outside_db)
    db.execute("CREATE TABLE entries (store_key TEXT, seq INTEGER, uid TEXT, payload TEXT)")
    entry = {"type": "user", "message": {"role": "user", "content": SECRET}}
    db.execute("INSERT INTO entries VALUES ('p/s2', 1, 'u', ?)", (json.dumps(entry),))
    db.commit()
    db.close()
    (runs / "sessions.db").symlink_to(outside_db)
    return root


def test_the_viewer_never_follows_a_jobs_symlinks_out_of_it(tmp_path):
    secret = outside_secret(tmp_path / "outside")
    home = tmp_path / "home"
    _evil_job(home, "evil", secret)
    linked = write_job(home, "b", "linked-manifest", "failed")
    (linked / "runs").mkdir()
    (secret.parent / "rows.json").write_text(json.dumps([{"step": SECRET, "text": SECRET}]))
    (linked / "runs" / "manifest.json").symlink_to(secret.parent / "rows.json")
    (linked / "logs").mkdir()
    os.mkfifo(linked / "logs" / "container.log")  # opened for a tail, it would block the request
    passwd = Path("/etc/passwd").read_text()[:30]
    server = ViewServer(Home(home), 0)
    server.start_in_thread()
    try:
        started = time.monotonic()
        status, body = get(server, "/api/job?batch=b&job=evil")
        assert status == 200
        text = json.dumps(body, ensure_ascii=False)
        assert SECRET not in text and passwd not in text
        handoffs = [s["handoff"] for s in body["trajectory"]["steps"]]  # type: ignore[index]
        assert [h["text"] for h in handoffs] == [None, None]
        assert all("symlink -> " in h["problem"] for h in handoffs)
        assert "sessions.db" in body["trajectory"]["problem"] and body["log_tail"] is None  # type: ignore[index]
        status, body = get(server, "/api/job?batch=b&job=linked-manifest")
        assert status == 200 and SECRET not in json.dumps(body, ensure_ascii=False)
        assert "symlink -> " in body["trajectory"]["problem"] and body["trajectory"]["steps"] == []  # type: ignore[index]
        assert get(server, "/api/diff?batch=b&job=evil")[0] == 200
        assert time.monotonic() - started < 10
    finally:
        server.shutdown()
        server.server_close()


def test_a_2gb_manifest_is_not_loaded(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    with open(runs / "manifest.json", "wb") as f:
        f.truncate(2 * 1024**3)  # sparse: costs no disk
    started = time.monotonic()
    t = job_trajectory(runs, tmp_path)
    assert time.monotonic() - started < 5
    assert t["steps"] == [] and "over the viewer's" in t["problem"]
    assert str(2 * 1024**3) in t["problem"]
