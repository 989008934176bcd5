"""Which environment names a job may set: one rule for `run --env` and jobs.toml (envnames.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_env_names_one_rule_for_cli_and_jobs_toml(tmp_path: Path) -> None:
    import typer

    from flower_batch.commands.jobs import parse_env
    from flower_batch.errors import MatrixFileError
    from flower_batch.jobsfile import load_jobs_file

    def cli_ok(name: str) -> bool:
        try:
            parse_env([f"{name}=me"])
            return True
        except typer.Exit:
            return False

    def toml_ok(name: str) -> bool:
        (tmp_path / "ws").mkdir(exist_ok=True)
        path = tmp_path / "jobs.toml"
        path.write_text(
            f'[batch]\nname = "b"\n[defaults]\nenv = {{ {name} = "me" }}\n'
            '[tasks.t]\nworkspace = "ws"\nprompt = "hi"\n'
        )
        try:
            load_jobs_file(path)
            return True
        except MatrixFileError:
            return False

    for name, allowed in (
        ("AUTHOR", True),
        ("OAUTH_SCOPE", True),
        ("MONKEY_PATCH", True),
        ("GITHUB_TOKEN", False),
        ("OPENAI_API_KEY", False),
        ("ANTHROPIC_MODEL", False),
        ("ANTHROPIC_BASE_URL", False),
    ):
        assert cli_ok(name) is allowed, name
        assert toml_ok(name) is allowed, name
    with pytest.raises(typer.Exit):
        parse_env(["1BAD=x"])
