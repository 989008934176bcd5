"""What `matrix --dry-run` prints: every job while they fit on a screen, else a summary."""

from __future__ import annotations

import json
from pathlib import Path

from flower_batch.commands.plan_summary import plan_lines
from flower_batch.matrix import (
    parse_jobs_text,
    plan_resume,
)


def jobs_text(axes: dict[str, list[int]], include: list[dict] = (), exclude: list[dict] = (), repeat: int = 1) -> str:
    def inline(d: dict) -> str:
        return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in d.items()) + " }"

    lines = ['[tasks.t]', 'prompt = "p"', "[matrix]", f"repeat = {repeat}"]
    lines += [f"{name} = {json.dumps(values)}" for name, values in axes.items()]
    if include:
        lines.append(f"include = [{', '.join(inline(e) for e in include)}]")
    if exclude:
        lines.append(f"exclude = [{', '.join(inline(e) for e in exclude)}]")
    return "\n".join(lines) + "\n"


# -- the dry-run summary -------------------------------------------------------------------------
def test_the_dry_run_lists_jobs_that_fit_and_summarises_the_rest(tmp_path: Path) -> None:
    text = jobs_text({"a": list(range(30)), "b": list(range(4))})
    jf = parse_jobs_text(text, path=tmp_path / "jobs.toml")
    plan = plan_resume(jf.jobs, "sha256:x", {})
    assert len(plan_lines(plan, jf.jobs, limit=120)) == 120
    summary = plan_lines(plan, jf.jobs, limit=40)
    assert len(summary) < 40
    assert summary[0] == "120 jobs (more than a screenful: summarised)"
    assert "axis a: 30 values (0, 1, 2, …) · 4 jobs each" in summary
    assert summary[-1].strip().startswith(f"run   {jf.jobs[-1].id}")
