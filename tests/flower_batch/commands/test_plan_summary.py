"""What `matrix --dry-run` prints: every job up to LISTED (or a screenful), else a summary."""

from __future__ import annotations

from pathlib import Path

from flower_batch.commands.plan_summary import plan_lines
from flower_batch.jobmodel.resume import plan_resume
from flower_batch.jobsfile import parse_jobs_text
from tests.batch_fixtures.jobs_text import jobs_text


# -- the dry-run summary -------------------------------------------------------------------------
def test_the_dry_run_lists_jobs_that_fit_and_summarises_the_rest(tmp_path: Path) -> None:
    text = jobs_text({"a": list(range(30)), "b": list(range(4))})
    jf = parse_jobs_text(text, path=tmp_path / "jobs.toml")
    plan = plan_resume(jf.jobs, "sha256:x", {})
    assert len(plan_lines(plan, jf.jobs, limit=120)) == 120
    summary = plan_lines(plan, jf.jobs, limit=40)
    assert len(summary) < 40
    assert summary[0] == "120 jobs (more than 40: summarised)"
    assert "axis a: 30 values (0, 1, 2, …) · 4 jobs each" in summary
    assert summary[-1].strip().startswith(f"run   {jf.jobs[-1].id}")


# -- why finished jobs run again (said with or without --dry-run) -----------------------------------
def test_finished_jobs_run_again_say_which_input_changed(tmp_path: Path) -> None:
    from dataclasses import replace

    from flower_batch.commands.plan_summary import rerun_lines
    from flower_batch.jobmodel.record import new_record
    from flower_batch.jobmodel.status import Status

    jf = parse_jobs_text(jobs_text({"a": [1, 2]}), path=tmp_path / "jobs.toml")
    records = {
        j.id: new_record(
            j, batch="b", image_id="sha256:x", status=Status.PASSED, finished_at="2026-01-01T00:00:00Z"
        )
        for j in jf.jobs
    }
    assert rerun_lines(plan_resume(jf.jobs, "sha256:x", records)) == []  # all kept
    changed = [replace(j, workspace_hash="sha256:other") for j in jf.jobs]
    (line,) = rerun_lines(plan_resume(changed, "sha256:x", records))
    ids = ", ".join(j.id for j in jf.jobs)
    assert line == f"2 finished jobs run again: inputs changed: workspace files ({ids})"
