"""`show` of a Harbor job (issue 35): its reward with the threshold and reward.json's keys, the
task's folder, digest, metadata and network as asked and as run; --json has the record's reward."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from flower_batch.cli import app
from tests.batch_fixtures.harbor_records import harbor_home


def test_show_names_the_reward_and_the_harbor_task(tmp_path: Path) -> None:
    home, records = harbor_home(tmp_path)
    result = CliRunner().invoke(
        app, ["show", "tb/regex-log.a.r1", "--home", str(home.root)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "0.75 (passes at 1.00) · checks_passed 3" in result.output
    digest = records["regex-log.a.r1"].spec.harbor.digest  # type: ignore[union-attr]
    assert digest in result.output
    assert "difficulty medium · category data-processing · tags regex, logs" in result.output
    assert "asks no-network, ran gateway" in result.output
    shown = CliRunner().invoke(app, ["show", "tb/regex-log.a.r1", "--json", "--home", str(home.root)])
    assert json.loads(shown.output)["record"]["reward"] == {"value": 0.75, "detail": {"checks_passed": 3.0}}
