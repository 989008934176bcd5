"""Pre-flight of the workspaces a run copies (issue 34): over the size limit, or a home that holds
the workspace, is one line and exit 2 before anything is written; what would be skipped is named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import typer

from flower_batch.commands.preflight import preflight_job
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.preflight import Preflight


def job(ws: Path, **kw: object) -> JobSpec:
    return JobSpec(id="j1", task="t", variant="v", repeat=1, matrix={}, prompt="hi", workspace=ws, **kw)  # type: ignore[arg-type]


def project(tmp_path: Path) -> Path:
    ws = tmp_path / "proj"
    (ws / "assets").mkdir(parents=True)
    (ws / "assets" / "big.bin").write_bytes(b"\0" * (2 << 20))
    (ws / "main.py").write_text("x = 1\n")
    return ws


def test_over_the_limit_is_one_line_and_exit_2_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = project(tmp_path)
    home = ws / "volumes"
    with pytest.raises(typer.Exit) as stopped:
        preflight_job(
            job(ws, workspace_limit=1 << 20), None, "adhoc", describe=None, flows_dir=None, copies_from=home
        )
    assert stopped.value.exit_code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    assert "is 2.0 MiB, over the 1.0 MiB a job copies (largest: assets/ 2.0 MiB" in lines[0]
    assert lines[0].endswith("or allow it: --workspace-limit SIZE (or none)")
    assert not home.exists()


def test_allowed_explicitly_or_left_out_it_passes(tmp_path: Path) -> None:
    ws = project(tmp_path)
    pf = Preflight(lambda f, v, _: f"{f} {v}")
    pf.add_workspaces([job(ws, workspace_limit=0)], None, fix="")  # "none"
    pf.add_workspaces([job(ws, workspace_limit=1 << 20, exclude=("assets/",))], None, fix="")
    (ws / ".flowerbatchignore").write_text("*.bin\n")
    pf.add_workspaces([job(ws, workspace_limit=1 << 20)], None, fix="")
    assert pf.problems == []


def test_a_home_that_holds_the_workspace_is_refused_in_one_line(tmp_path: Path) -> None:
    ws = project(tmp_path)
    pf = Preflight(lambda f, v, _: f"{f} {v}")
    pf.add_workspaces([job(ws)], ws, fix="")
    pf.add_workspaces([job(ws)], tmp_path, fix="")
    assert len(pf.problems) == 2
    assert all(
        "is inside the flower-batch home" in p and "--home or FLOWER_BATCH_HOME" in p for p in pf.problems
    )


def test_what_a_copy_would_skip_is_named_in_a_warning(tmp_path: Path) -> None:
    ws = project(tmp_path)
    os.mkfifo(ws / "pipe")
    (ws / "etc").symlink_to("/etc")
    pf = Preflight(lambda f, v, _: f"{f} {v}")
    pf.add_workspaces([job(ws)], ws / "volumes", fix="")
    assert pf.problems == []
    (warning,) = pf.warnings
    assert "not copied: etc (symlink -> /etc: points out of the workspace); pipe (fifo)" in warning


def test_a_home_given_inside_the_workspace_is_refused_the_default_one_is_left_out(tmp_path: Path) -> None:
    ws = project(tmp_path)
    pf = Preflight(lambda f, v, _: f"{f} {v}")
    pf.add_workspaces([job(ws, workspace_limit=0)], ws / "volumes", fix="")  # ./volumes by default
    assert pf.problems == []
    pf.add_workspaces([job(ws, workspace_limit=0)], ws / "my-home", fix="", home_given=True)
    (line,) = pf.problems
    assert line == (
        f"the flower-batch home {ws / 'my-home'} (--home or FLOWER_BATCH_HOME) is inside workspace {ws.resolve()}: "
        "give a home outside it, or none (./volumes, left out of every copy)"
    )


def test_a_200_mb_file_is_over_the_default_limit(tmp_path: Path) -> None:
    ws = project(tmp_path)
    with (ws / "assets" / "dump.bin").open("wb") as f:
        f.truncate(201 << 20)  # sparse: costs no disk
    pf = Preflight(lambda f, v, _: f"{f} {v}")
    pf.add_workspaces([job(ws)], None, fix="--workspace-limit SIZE (or none)")
    (line,) = pf.problems
    assert "is 203.0 MiB, over the 200.0 MiB a job copies (largest: assets/ 203.0 MiB, main.py 6 B)" in line
