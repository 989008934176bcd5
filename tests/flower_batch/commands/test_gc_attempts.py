"""`flower-batch gc --attempts --keep N [--dry-run]`: the only way kept attempts go."""

from __future__ import annotations

from pathlib import Path

from flower_batch.layout import Home
from flower_batch.running.attempts import attempt_numbers, keep_previous_attempt
from tests.batch_fixtures.attempts import finished_attempt


def test_gc_attempts_keeps_the_newest_n_and_dry_run_removes_nothing(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flower_batch.cli import app

    jd = Home(tmp_path / "home").job("b", "j")
    for n in (1, 2, 3):
        finished_attempt(jd, n)
        keep_previous_attempt(jd, jd.record(), n + 1)
    finished_attempt(jd, 4)
    run = CliRunner().invoke
    home = ["--home", str(tmp_path / "home")]
    assert run(app, ["gc", "--keep", "1", *home]).exit_code == 2  # --keep alone is no prune
    dry = run(app, ["gc", "--attempts", "--keep", "1", "--dry-run", *home])
    assert dry.exit_code == 0 and "would remove 2 earlier attempt(s)" in dry.output
    assert attempt_numbers(jd) == [1, 2, 3]
    done = run(app, ["gc", "--attempts", "--keep", "1", *home])
    assert done.exit_code == 0 and attempt_numbers(jd) == [3]
    assert jd.record().attempt == 4 and (jd.workspace / "answer.txt").read_text() == "attempt 4\n"
