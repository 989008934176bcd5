"""`flower-batch run` refuses a secret that is not set without creating the job."""

from __future__ import annotations

from pathlib import Path


def test_run_cli_refuses_unset_secret_without_creating_the_job(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flower_batch.cli import app

    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "home"
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(ws),
            "hi",
            "--secret",
            "NOPE_X_UNSET_9",
            "--name",
            "j1",
            "--image",
            "sha256:" + "0" * 64,
            "--home",
            str(home),
        ],
        env={"NOPE_X_UNSET_9": ""},
    )
    assert result.exit_code == 2
    assert not (home / "adhoc" / "j1").exists()
