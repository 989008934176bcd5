"""A report over jobs whose folders hold hostile things (a FIFO, a socket, symlinks to secrets,
names that are not UTF-8): written at once, nothing outside the job read, each thing named."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from flower_batch.jobmodel.record import load_records
from flower_batch.reports import html_report, log_tails, results_from_records, write_results_json
from tests.hostile_fixtures import SECRET, hostile_workspace, outside_secret
from tests.view_fixtures import write_job


def test_a_report_over_hostile_job_folders(tmp_path: Path) -> None:
    secret = outside_secret(tmp_path / "outside")
    home = tmp_path / "home"
    evil = write_job(home, "b", "t-v-1", "failed")
    kinds = hostile_workspace(evil / "workspace", secret)
    (evil / "logs").mkdir()
    (evil / "logs" / "container.log").symlink_to(secret)
    piped = write_job(home, "b", "t-v-2", "failed")
    (piped / "logs").mkdir(parents=True)
    os.mkfifo(piped / "logs" / "container.log")
    fine = write_job(home, "b", "t-v-3", "passed")
    (fine / "logs").mkdir()
    (fine / "logs" / "container.log").write_text("x" * 10_000 + "END\n")
    started = time.monotonic()
    tails = log_tails(home / "b", ["t-v-1", "t-v-2", "t-v-3", "t-v-4"])
    assert "symlink -> " in tails["t-v-1"] and "fifo" in tails["t-v-2"] and "t-v-4" not in tails
    assert tails["t-v-3"].endswith("END\n") and len(tails["t-v-3"]) == 4000
    records = {k: v for k, v in load_records(home / "b").items()}
    res = results_from_records(records, batch="b", batch_dir=home / "b", log_tails=tails)  # type: ignore[arg-type]
    doc = json.dumps(res.to_document(), ensure_ascii=False)
    page = html_report(res)
    write_results_json(res, tmp_path / "results.json")
    assert time.monotonic() - started < 10
    assert SECRET not in doc and SECRET not in page
    assert res.diffs["t-v-1"]["added"] == len(kinds) + 3  # plain.txt and the two odd names too
