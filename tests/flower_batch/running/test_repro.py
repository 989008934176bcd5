"""repro's plan and comparison (running/repro.py): the first difference of two runs, workspace
changes, and drift (image, SDK, CLI, workspace)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from flower_batch.errors import ImageMissing, ReproError
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.running import image
from flower_batch.running.repro import (
    ReproDiff,
    changes,
    copy_flows,
    drift_between,
    pinned_image,
    workspace_files,
)
from tests.hostile_fixtures import SECRET, hostile_workspace, outside_secret

# -- repro's comparison ---------------------------------------------------------------------------


def _step(name: str, ok: bool = True, calls: tuple = ()) -> dict:
    return {"step": name, "ok": ok, "verdict": None, "tool_calls": list(calls), "error": None}


def test_repro_diff_names_the_first_difference() -> None:
    same = ReproDiff([_step("do")], [_step("do")], {"a.txt": "added"}, {"a.txt": "added"}, [])
    assert same.identical and same.first_difference() is None
    calls = ReproDiff([_step("do", calls=({"name": "Read", "input": {"f": 1}},))], [_step("do")], {}, {}, [])
    assert not calls.identical and calls.first_difference() == "step attempt 1 (do): tool_calls differs"
    missing = ReproDiff([_step("do"), _step("verify")], [_step("do")], {}, {}, [])
    assert missing.first_difference() == "step attempt 2 (verify) exists only in the original"
    files = ReproDiff([_step("do")], [_step("do")], {"a": "added"}, {"a": "added"}, ["a"])
    assert not files.identical and "a" in files.first_difference()


def test_workspace_changes() -> None:
    assert changes({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}) == {"b": "modified", "c": "added"}
    assert changes({"a": "1"}, {}) == {"a": "deleted"}


def test_drift_is_image_sdk_cli_and_workspace(tmp_path: Path) -> None:
    spec = JobSpec(id="j", task="t", variant="v", repeat=1, matrix={}, prompt="p")
    record = JobRecord(
        job_id="j", batch="b", inputs_hash="h", image_id="sha256:aaa", status="passed",
        spec=spec, versions={"sdk": "0.2.184", "cli": "2.1.327"},
    )  # fmt: skip
    assert drift_between(record, PinnedImage("sha256:aaa", {"sdk": "0.2.184", "cli": "2.1.327"}), spec) == []
    drift = drift_between(record, PinnedImage("sha256:bbb", {"sdk": "0.2.185", "cli": "2.1.327"}), spec)
    assert drift == ["image sha256:aaa -> sha256:bbb", "claude-agent-sdk 0.2.184 -> 0.2.185"]


def test_a_hostile_workspace_is_listed_at_once_and_a_flows_copy_stays_inside(tmp_path: Path) -> None:
    secret = outside_secret(tmp_path / "outside")
    ws = tmp_path / "ws"
    kinds = hostile_workspace(ws, secret)
    started = time.monotonic()
    files = workspace_files(ws)  # a FIFO opened for its digest would wait for ever
    assert time.monotonic() - started < 5
    for name, kind in kinds.items():
        assert files[name].startswith("link:" if kind == "symlink" else kind), name
    assert "caf\\xe9.txt" in files and "two\\nlines.txt" in files
    assert files["plain.txt"] == workspace_files(ws)["plain.txt"] and SECRET not in json.dumps(files)
    flows = tmp_path / "flows"
    skipped = dict(copy_flows(ws, flows))
    assert skipped == {name: kind for name, kind in kinds.items() if kind != "symlink"}
    assert (flows / "passwd-link").is_symlink() and (flows / "plain.txt").read_text() == "fine\n"


def test_an_image_missing_from_the_engine_is_a_repro_error_naming_the_fix(monkeypatch) -> None:
    # repro.pinned_image is image.pinned_image with repro's own one line when the image is gone.
    def missing(ref: str) -> None:
        raise ImageMissing(f"no image {ref}")

    monkeypatch.setattr(image, "read_image", missing)
    with pytest.raises(
        ReproError, match="not in the Docker engine: rebuild it, or pass --image TAG --allow-drift"
    ):
        pinned_image("sha256:" + "a" * 64)
