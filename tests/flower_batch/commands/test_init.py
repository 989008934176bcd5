"""`flower-batch init` (issue 34): a starter jobs.toml, flows.py and offline scenario that load as
written; never a file overwritten, and one line when one is there already. Running them in
containers: tests/test_installed_tool.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flower_batch.cli import app


def init_in(folder: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.chdir(folder)
    return CliRunner().invoke(app, ["init"])


def test_init_writes_a_matrix_a_workflow_and_a_scenario_that_load(tmp_path: Path, monkeypatch) -> None:
    from flower.flows.loader import load_workflow
    from flower_batch.jobsfile import load_jobs_file
    from flower_batch.preflight.scenarios import scenario_problems

    project = tmp_path / "my proj"
    project.mkdir()
    result = init_in(project, monkeypatch)
    assert result.exit_code == 0, result.output
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()) == [
        "flows.py",
        "jobs.toml",
        "scenarios/offline.toml",
    ]
    jf = load_jobs_file(project / "jobs.toml")
    assert jf.name == "my-proj" and len(jf.jobs) == 4  # 2 variants x 2 repeats
    assert {j.workflow for j in jf.jobs} == {"flows:main", "flows:careful"}
    assert all(j.workspace == project.resolve() and j.check == "test -s NOTES.md" for j in jf.jobs)
    assert scenario_problems([project / "scenarios" / "offline.toml"]) == []  # the gateway's own parser
    monkeypatch.syspath_prepend(str(project))
    for name in ("main", "careful"):
        assert load_workflow(f"flows:{name}").name == name


@pytest.mark.parametrize("there", ["jobs.toml", "flows.py", "scenarios/offline.toml"])
def test_init_never_overwrites_and_says_so_in_one_line(tmp_path: Path, monkeypatch, there: str) -> None:
    (tmp_path / there).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / there).write_text("mine\n")
    result = init_in(tmp_path, monkeypatch)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(
        f"{there} already exists: init never overwrites a file; move it away, or run init in another folder"
    )
    assert (tmp_path / there).read_text() == "mine\n"
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == [there]
