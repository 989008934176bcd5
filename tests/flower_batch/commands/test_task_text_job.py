"""A task-text job: `flower-batch run WS "task"` runs flower's starter flow (`flower go`) in the
container; `wake` continues it silently, then with more words — the orchestrator's exact commands."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.batch_fixtures.rig import REPO, fb, private_home, runtime_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SCENARIO = REPO / "examples" / "scenarios" / "starter.toml"


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield from private_home(tmp_path)


def _steps(home: Path) -> list[tuple[str, bool]]:
    rows = json.loads((home / "adhoc" / "hello-go" / "runs" / "manifest.json").read_text())
    return [(r["step"], r["ok"]) for r in rows]


def test_task_job_runs_the_starter_flow_and_wakes(home: Path, tmp_path: Path) -> None:
    runtime_image()
    ws = tmp_path / "src"
    ws.mkdir()
    first = fb(
        "run",
        ws,
        "make hello.txt say hi",
        "--scenario",
        SCENARIO,
        "--name",
        "hello-go",
        "--persistent",
        home=home,
    )
    assert first.returncode == 0, first.stderr
    job = home / "adhoc" / "hello-go"
    assert (job / "workspace" / "hello.txt").read_text().strip() == "hi"
    assert [s for s, _ in _steps(home)] == [
        "确认需求",
        "设定目标",
        "干活",
        "干活·判定#1",
        "干活#round2",
        "干活·判定#2",
    ]
    brief = next(job.joinpath("workspace").rglob("需求.md")).read_text()

    silent = fb("wake", "hello-go", home=home)
    assert silent.returncode == 0, silent.stderr
    assert "wake #2" in (job / "logs" / "container.log").read_text()
    assert next(job.joinpath("workspace").rglob("需求.md")).read_text() == brief  # nothing re-derived
    lineage = json.loads((job / "runs" / "lineage.json").read_text())
    assert lineage["woke"] == 2 and set(lineage["steps"]) == {"确认需求", "设定目标", "干活"}

    words = fb("wake", "hello-go", "also add bye.txt", home=home)
    assert words.returncode == 0, words.stderr
    assert (job / "workspace" / "bye.txt").read_text().strip() == "bye"
    assert "also add bye.txt" in next(job.joinpath("workspace").rglob("需求.md")).read_text()
    record = json.loads((job / "record.json").read_text())
    assert record["status"] == "passed" and record["attempt"] == 3 and record["gateway_mode"] == "scripted"
