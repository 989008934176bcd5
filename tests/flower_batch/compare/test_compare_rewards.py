"""The nightly comparison with rewards (issue 35): each side's mean reward per row, in the
terminal table, the Markdown, report.html's section and comparison.json; a batch pair without a
verifier has no reward column."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rich.console import Console

from flower_batch.compare.diff import diff_sides
from flower_batch.compare.html import comparison_section
from flower_batch.compare.render import REWARD_COLUMN, diff_markdown, diff_table
from flower_batch.compare.sides import side_from_document
from flower_batch.jobmodel.grading import Reward
from flower_batch.reports import BatchResults, results_from_records
from tests.batch_fixtures.harbor_records import BATCH, harbor_home


def _sides(tmp_path: Path) -> tuple[BatchResults, BatchResults]:
    _, records = harbor_home(tmp_path)
    base = results_from_records(records, batch=BATCH)
    better = {k: replace(r, reward=Reward(1.0)) for k, r in records.items()}
    return base, results_from_records(better, batch=BATCH)


def _table(diff) -> str:  # type: ignore[no-untyped-def]
    console = Console(width=250, record=True)
    console.print(diff_table(diff))
    return console.export_text()


def test_each_side_s_mean_reward_is_shown_beside_the_pass_rate(tmp_path: Path) -> None:
    base, new = _sides(tmp_path)
    diff = diff_sides(
        side_from_document(base.to_document(), source="base"),
        side_from_document(new.to_document(), source="new"),
    )
    assert diff.overall.base.mean_reward == 0.875 and diff.overall.new.mean_reward == 1.0
    assert "0.88 → 1.00 (+0.12)" in _table(diff)
    assert f"| {REWARD_COLUMN} |" in diff_markdown(diff) and "0.75 → 1.00 (+0.25)" in diff_markdown(diff)
    html = comparison_section(diff)
    assert f"<th>{REWARD_COLUMN}</th>" in html and "0.88 → 1.00 (+0.12)" in html
    overall = diff.to_document()["overall"]
    assert overall["new"]["mean_reward"] == 1.0 and overall["mean_reward_delta"] == 0.125


def test_no_reward_column_without_a_verifier(tmp_path: Path) -> None:
    base, _ = _sides(tmp_path)
    document = base.to_document()
    for job in document["jobs"]:
        job.pop("reward")
    side = side_from_document(document, source="plain")
    diff = diff_sides(side, side)
    assert REWARD_COLUMN not in _table(diff) and REWARD_COLUMN not in diff_markdown(diff)
    assert "mean_reward" not in str(diff.to_document())
