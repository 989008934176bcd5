import json
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from flower.runtime.manifest import Manifest, new_run_id

HELPER = Path(__file__).with_name("helpers_manifest_writer.py")


def test_run_id_format_and_uniqueness():
    ids = {new_run_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", i) for i in ids)


def test_write_replaces_this_runs_rows_and_keeps_other_runs(tmp_path):
    path = tmp_path / "manifest.json"
    a, b = Manifest(path, "run-a"), Manifest(path, "run-b")
    a.write([{"step": "x"}])
    b.write([{"step": "y"}])
    a.write([{"step": "x"}, {"step": "x#retry1"}])

    rows = json.loads(path.read_text(encoding="utf-8"))
    assert [(r["run"], r["step"]) for r in rows] == [("run-b", "y"), ("run-a", "x"), ("run-a", "x#retry1")]
    assert a.read() == rows
    assert [r["step"] for r in a.rows_for_run("run-a")] == ["x", "x#retry1"]
    assert b.rows_for_run("run-c") == []


def test_file_format_and_serialisation(tmp_path):
    path = tmp_path / "manifest.json"
    when = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    Manifest(path, "r1").write([{"step": "干活·判定#1", "ended_at": when, "workspace": tmp_path}])

    text = path.read_text(encoding="utf-8")
    assert "干活·判定#1" in text  # ensure_ascii=False
    assert text.startswith('[\n  {\n    "step"')  # indent 2
    (row,) = json.loads(text)
    assert row == {
        "step": "干活·判定#1",
        "ended_at": when.isoformat(),
        "workspace": str(tmp_path),
        "run": "r1",
    }


def test_unserialisable_row_fails_before_touching_the_file(tmp_path):
    path = tmp_path / "manifest.json"
    m = Manifest(path, "r1")
    m.write([{"step": "a"}])
    with pytest.raises(TypeError, match="object"):
        m.write([{"step": "b", "bad": object()}])
    assert [r["step"] for r in m.read()] == ["a"]


def test_missing_file_reads_empty(tmp_path):
    assert Manifest(tmp_path / "nope" / "manifest.json", "r").read() == []


@pytest.mark.parametrize(
    "garbage", ['[{"step": "a", "run": "r0"}, {"st', '{"not": "a list"}', "[1, 2]", "\xff\xfe"]
)
def test_corrupt_file_is_moved_aside_not_destroyed(tmp_path, garbage):
    path = tmp_path / "manifest.json"
    original = garbage.encode("latin-1")
    path.write_bytes(original)
    m = Manifest(path, "r1")

    assert m.read() == []  # reading alone never moves anything
    assert path.exists()

    m.write([{"step": "a"}])
    aside = list(tmp_path.glob("manifest.json.corrupt-*"))
    assert len(aside) == 1
    assert aside[0].read_bytes() == original
    assert m.read() == [{"step": "a", "run": "r1"}]


def test_no_temp_files_left_and_old_content_survives_a_failed_replace(tmp_path, monkeypatch):
    path = tmp_path / "manifest.json"
    m = Manifest(path, "r1")
    for i in range(5):
        m.write([{"step": f"s{j}"} for j in range(i + 1)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "manifest.json.lock"]

    def boom(*_):
        raise OSError("disk full")

    monkeypatch.setattr("flower.runtime.manifest.os.replace", boom)
    with pytest.raises(OSError, match="disk full"):
        m.write([{"step": "never"}])
    assert len(m.read()) == 5
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.slow
def test_sixteen_processes_appending_concurrently_lose_no_rows(tmp_path):
    path, go = tmp_path / "manifest.json", tmp_path / "go"
    n_procs, n_rows = 16, 50
    procs = [
        subprocess.Popen(
            [sys.executable, str(HELPER), str(path), str(w), str(n_rows), str(go)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(n_procs)
    ]
    run_ids = [p.stdout.readline().strip() for p in procs]  # every child is up and waiting
    go.touch()
    deadline = time.monotonic() + 120
    for p in procs:
        assert p.wait(timeout=max(1, deadline - time.monotonic())) == 0

    rows = json.loads(path.read_text(encoding="utf-8"))
    assert len(rows) == n_procs * n_rows
    for w, run_id in enumerate(run_ids):
        steps = [r["step"] for r in rows if r["run"] == run_id]
        assert steps == [f"w{w}-step{i}" for i in range(n_rows)]
    assert not list(tmp_path.glob("*.tmp"))
    assert not list(tmp_path.glob("*.corrupt-*"))
