"""A job's files are hostile input: exporting a job whose sessions.db, manifest, handoff document and
meter point out of its folder reads none of them, says what it left out, and stays valid ATIF."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from flower.catalogue.names import NOTES_DIR, WORKBENCH_DIR
from flower.context.handoff import doc_path
from flower_batch.export.batch import export_batch
from flower_batch.layout import Home
from tests.flower_batch.export.harbor_check import validate
from tests.hostile_fixtures import SECRET, outside_secret
from tests.view_fixtures import write_job


def evil_job(home: Path, secret: Path) -> Path:
    root = write_job(home, "b", "evil", "failed")
    runs, notes, logs = root / "runs", root / "workspace" / WORKBENCH_DIR / NOTES_DIR, root / "logs"
    for d in (runs, notes, logs):
        d.mkdir(parents=True)
    rows = [{"step": "work", "session_id": "s2", "retired": ["s1"], "ok": False, "error": "boom"}]
    (runs / "manifest.json").write_text(json.dumps(rows))
    doc_path(notes, "work").symlink_to(secret)
    outside_db = secret.parent / "other.db"
    db = sqlite3.connect(outside_db)
    db.execute("CREATE TABLE entries (store_key TEXT, seq INTEGER, uid TEXT, payload TEXT)")
    entry = {"type": "user", "message": {"role": "user", "content": SECRET}}
    db.execute("INSERT INTO entries VALUES ('p/s2', 1, 'u', ?)", (json.dumps(entry),))
    db.commit()
    db.close()
    (runs / "sessions.db").symlink_to(outside_db)
    meter = secret.parent / "meter.jsonl"
    meter.write_text(json.dumps({"kind": "usage", "model": "m", "priced_as": SECRET}) + "\n")
    (logs / "meter.jsonl").symlink_to(meter)
    garbled_job(home)
    linked = write_job(home, "b", "linked-manifest", "failed")
    (linked / "runs").mkdir()
    (secret.parent / "rows.json").write_text(json.dumps([{"step": SECRET, "text": SECRET}]))
    (linked / "runs" / "manifest.json").symlink_to(secret.parent / "rows.json")
    return root


def garbled_job(home: Path) -> None:
    """A job whose own files are garbage of every shape a reader might trip on."""
    root = write_job(home, "b", "garbled", "failed")
    runs = root / "runs"
    runs.mkdir()
    rows = [{"step": 7, "session_id": "s1", "started_at": "yesterday", "error": "x" * 300_000}, "not a row"]
    (runs / "manifest.json").write_text(json.dumps(rows))
    db = sqlite3.connect(runs / "sessions.db")
    db.execute("CREATE TABLE entries (store_key TEXT, seq INTEGER, uid TEXT, payload TEXT)")
    entries = [
        {"type": "user", "timestamp": "not a time", "message": {"role": "user", "content": [1, None, {"type": "text"}]}},
        {"type": "assistant", "message": {"id": "m1", "model": 5, "usage": {"input_tokens": "many"},
                                          "content": [{"type": "tool_use", "id": None, "name": None, "input": [1, 2]}]}},
        {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": {"a": 1}}]}},
        {"type": "assistant", "message": "not a dict"},
        "not even an object",
    ]  # fmt: skip
    for seq, entry in enumerate(entries):
        db.execute("INSERT INTO entries VALUES ('p/s1', ?, 'u', ?)", (seq, json.dumps(entry)))
    db.execute("INSERT INTO entries VALUES ('p/s1', 99, 'u', '{torn')")
    db.commit()
    db.close()


def test_export_reads_nothing_a_symlink_points_at(tmp_path):
    secret = outside_secret(tmp_path / "outside")
    home = Home(tmp_path / "home")
    evil_job(home.root, secret)
    atif = export_batch(home, "b", "atif", tmp_path / "atif")
    inspect = export_batch(home, "b", "inspect", tmp_path / "inspect")
    assert atif.jobs == 3 and inspect.jobs == 3
    for path in [*atif.files, *inspect.files]:
        assert SECRET not in path.read_text()
    assert validate(atif.files) == {str(p): [] for p in atif.files}
    t = json.loads((tmp_path / "atif" / "evil" / "trajectory.json").read_text())
    assert any("sessions.db" in note for note in t["extra"]["flower_batch"]["not_exported"])
    handoff = next(s for s in t["steps"] if "handoff" in s["extra"]["flower"])
    assert "symlink -> " in handoff["observation"]["results"][0]["extra"]["problem"]
    linked = json.loads((tmp_path / "atif" / "linked-manifest" / "trajectory.json").read_text())
    assert any("symlink -> " in note for note in linked["extra"]["flower_batch"]["not_exported"])
