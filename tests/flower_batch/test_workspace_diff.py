"""The workspace diff (added/changed/removed, binary, symlinks, caps, a source that is gone) and
what the report makes of it: each job's diff summary."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from flower_batch import workspace_diff
from flower_batch.jobmodel.record import load_records
from flower_batch.reports import html_report, results_from_records
from flower_batch.workspace_diff import diff, summarize
from tests.hostile_fixtures import (
    SECRET,
    deep_tree,
    hostile_workspace,
    outside_secret,
    remove_deep,
    wide_tree,
)
from tests.view_fixtures import write_job


def tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


def test_kinds_lines_and_binary(tmp_path):
    src = tree(
        tmp_path / "src",
        {"same.txt": "x\n", "edit.py": "a\nb\nc\n", "gone.txt": "bye\n", "sub/img.bin": b"\x00PNG1"},
    )
    ws = tree(
        tmp_path / "ws",
        {"same.txt": "x\n", "edit.py": "a\nB\nc\nd\n", "sub/img.bin": b"\x00PNG2", "sub/new.md": "one\ntwo"},
    )
    d = diff(src, ws)
    kinds = {f.path: f.kind for f in d.files}
    assert kinds == {
        "edit.py": "changed",
        "gone.txt": "removed",
        "sub/img.bin": "changed",
        "sub/new.md": "added",
    }
    edit = next(f for f in d.files if f.path == "edit.py")
    assert (edit.added_lines, edit.removed_lines) == (2, 1)
    assert (
        edit.diff is not None
        and "-b\n+B\n" in edit.diff
        and edit.diff.startswith("--- a/edit.py\n+++ b/edit.py\n")
    )
    new = next(f for f in d.files if f.path == "sub/new.md")
    assert "\\ No newline at end of file" in (new.diff or "")
    img = next(f for f in d.files if f.path == "sub/img.bin")
    assert img.binary and img.diff is None and img.note == "binary"
    s = d.summary()
    assert (s["added"], s["changed"], s["removed"], s["lines_added"], s["lines_removed"]) == (1, 2, 1, 4, 2)
    assert summarize(src, ws).summary() == s  # the report's counts equal the viewer's
    assert summarize(src, ws).files[0].diff is None  # counts only: no text kept


def test_caps_per_file_and_in_total(tmp_path):
    big_old = "".join(f"line {i}\n" for i in range(3000))
    big_new = "".join(f"LINE {i}\n" for i in range(3000))
    src = tree(tmp_path / "src", {"a.txt": big_old, "b.txt": big_old, "c.txt": big_old})
    ws = tree(tmp_path / "ws", {"a.txt": big_new, "b.txt": big_new, "c.txt": big_new})
    d = diff(src, ws, file_limit=10_000, total_limit=25_000)
    sizes = [len(f.diff or "") for f in d.files]
    assert all(f.diff_truncated for f in d.files) and sizes[0] == 10_000
    assert sum(sizes) <= 25_000 and d.truncated
    assert all(f.added_lines == 3000 and f.removed_lines == 3000 for f in d.files)  # counts stay exact


def test_symlinks_are_compared_not_followed(tmp_path):
    outside = tree(tmp_path / "outside", {"secret.txt": "do not read\n"})
    src = tree(tmp_path / "src", {"a.txt": "a\n"})
    ws = tree(tmp_path / "ws", {"a.txt": "a\n"})
    (ws / "link").symlink_to(outside / "secret.txt")
    (ws / "dirlink").symlink_to(outside)
    d = diff(src, ws)
    assert sorted(f.path for f in d.files) == ["dirlink", "link"]
    assert all(
        f.kind == "added" and f.diff is None and (f.note or "").startswith("symlink -> ") for f in d.files
    )
    assert "do not read" not in repr(d.to_dict())


def test_empty_source_and_missing_source(tmp_path):
    ws = tree(tmp_path / "ws", {"made.txt": "1\n2\n"})
    started_empty = summarize(None, ws).summary()
    assert started_empty["available"] and (started_empty["added"], started_empty["lines_added"]) == (1, 2)
    gone = summarize(tmp_path / "moved-away", ws).summary()
    assert gone["source_missing"] and not gone["available"] and gone["added"] == 0
    assert summarize(tmp_path, tmp_path / "no-ws").summary()["workspace_missing"]


def test_report_carries_each_jobs_diff_summary(tmp_path):
    src = tree(tmp_path / "src", {"keep.txt": "k\n", "edit.txt": "1\n"})
    batch = tmp_path / "home" / "b"
    done = write_job(tmp_path / "home", "b", "t-v-1", "passed", source=src, cost_usd=0.1)
    tree(done / "workspace", {"keep.txt": "k\n", "edit.txt": "2\n", "new.txt": "n\n"})
    gone = write_job(tmp_path / "home", "b", "t-v-2", "failed", source=tmp_path / "deleted-src")
    tree(gone / "workspace", {"x": "y"})
    write_job(tmp_path / "home", "b", "t-v-3", "running", source=src)
    records = {k: v for k, v in load_records(batch).items()}
    res = results_from_records(records, batch="b", batch_dir=batch)  # type: ignore[arg-type]
    assert res.diffs["t-v-1"]["added"] == 1 and res.diffs["t-v-1"]["changed"] == 1
    assert res.diffs["t-v-2"]["source_missing"] and "t-v-3" not in res.diffs  # running: not summarized
    page = html_report(res)
    assert len(re.findall(r'<span class="diffsum"', page)) == 2
    first = re.search(r'id="job-t-v-1".*?<span class="diffsum"([^>]*)>', page, flags=re.S)
    assert (
        first
        and 'data-added="1" data-changed="1" data-removed="0" data-lines-added="2" data-lines-removed="1"'
        in first.group(1)
    )
    second = re.search(r'id="job-t-v-2".*?<span class="diffsum"([^>]*)>([^<]*)', page, flags=re.S)
    assert second and 'data-diff="unavailable"' in second.group(1) and second.group(2) == "diff: source gone"
    doc = res.to_document()
    assert {j["id"]: (j["workspace_diff"] or {}).get("added") for j in doc["jobs"]} == {
        "t-v-1": 1,
        "t-v-2": 0,
        "t-v-3": None,
    }


def test_quick_check_and_a_same_size_edit(tmp_path):
    import os
    import shutil

    src = tree(tmp_path / "src", {"a.txt": "abc\n", "b.txt": "xyz\n"})
    ws = tmp_path / "ws"
    shutil.copytree(src, ws)  # as the runner copies it: mtimes kept
    assert diff(src, ws).files == []
    (ws / "b.txt").write_text("XYZ\n")  # same size, new content, new mtime
    assert [(f.path, f.kind) for f in diff(src, ws).files] == [("b.txt", "changed")]
    st = (src / "b.txt").stat()
    os.utime(ws / "b.txt", ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert [f.path for f in diff(src, ws).files] == ["b.txt"]  # a different mtime: contents compared


def test_a_hostile_workspace_is_summarized_at_once_and_each_entry_named(tmp_path):
    src = tree(tmp_path / "src", {"plain.txt": "fine\n"})
    ws = tmp_path / "ws"
    kinds = hostile_workspace(ws, outside_secret(tmp_path / "outside"))
    started = time.monotonic()
    d = diff(src, ws)
    assert time.monotonic() - started < 5  # the FIFO was never opened (it would wait for ever)
    notes = {f.path: f.note for f in d.files}
    for name, kind in kinds.items():
        assert (notes[name] or "").startswith(kind), name
    assert notes["caf\\xe9.txt"] is None and notes["two\\nlines.txt"] is None  # shown escaped, diffed
    assert "plain.txt" not in notes
    shown_doc = json.dumps(d.to_dict(), ensure_ascii=False).encode("utf-8")  # any name encodes
    assert SECRET.encode() not in shown_doc and b"root:x:0:0" not in shown_doc
    assert summarize(src, ws).summary()["added"] == len(kinds) + 2


def test_a_5000_deep_workspace_is_bounded_and_says_what_it_skipped(tmp_path):
    ws = tree(tmp_path / "ws", {"top.txt": "t\n"})
    deep_tree(ws, 5000)
    try:
        started = time.monotonic()
        d = summarize(None, ws)
        assert time.monotonic() - started < 5
        assert [f.path for f in d.files] == ["top.txt"]
        assert d.summary()["skipped_count"] == 1 and "deeper than" in d.summary()["skipped"][0]["why"]
    finally:
        remove_deep(ws)


def test_many_files_stop_at_the_cap_flagged(tmp_path, monkeypatch):
    monkeypatch.setattr(workspace_diff, "MAX_FILES", 1000)
    wide_tree(tmp_path / "ws", 3000, per_dir=500)
    d = summarize(None, tmp_path / "ws")
    assert d.truncated and d.summary()["truncated"] and len(d.files) < 1000


@pytest.mark.slow  # making 100,000 files takes 15 s here
def test_100000_files_are_summarized_in_bounded_time(tmp_path):
    wide_tree(tmp_path / "ws", 100_000)
    started = time.monotonic()
    d = summarize(None, tmp_path / "ws")
    assert time.monotonic() - started < 30
    assert d.truncated and len(d.files) <= workspace_diff.MAX_FILES


def test_what_the_copy_left_out_is_not_counted_removed(tmp_path):
    # issue 34: `run .` copies the project without its home and what .flowerbatchignore and
    # `exclude` name; the job's diff compares it with the copy it got, not with those.
    from flower_batch.workspace_scan import mark_home

    src, ws = tmp_path / "src", tmp_path / "ws"
    (src / "data").mkdir(parents=True)
    (src / "main.py").write_text("x = 1\n")
    (src / "data" / "big.csv").write_text("1,2\n")
    (src / "model.bin").write_bytes(b"0")
    (src / ".flowerbatchignore").write_text("*.bin\n")
    mark_home(src / "volumes")
    (src / "volumes" / "b" / "j").mkdir(parents=True)
    (src / "volumes" / "b" / "j" / "record.json").write_text("{}")
    ws.mkdir()
    (ws / "main.py").write_text("x = 2\n")
    (ws / ".flowerbatchignore").write_text("*.bin\n")
    got = summarize(src, ws, ("data/",))
    assert [(f.path, f.kind) for f in got.files] == [("main.py", "changed")]
    unfiltered = summarize(src, ws)  # without the job's exclude, data/ was copied: now it is gone
    assert ("data/big.csv", "removed") in [(f.path, f.kind) for f in unfiltered.files]
