"""How a local container is made to receive its secrets (docker/secret_handover.py): nothing the
engine is given to create it — command, env, tmpfs options — holds a value; the wait loop runs
the command with the listed secrets as env, and gives up in one line when none arrive."""

from __future__ import annotations

import subprocess
from pathlib import Path

from flower_batch.backend.base import ContainerSpec
from flower_batch.backend.docker import secret_handover
from flower_batch.backend.docker.secret_handover import receiving

VALUES = {"ANTHROPIC_API_KEY": "fbj-" + "1" * 40, "GITHUB_TOKEN": "ghp_" + "2" * 36}


def _spec(**kw: object) -> ContainerSpec:
    return ContainerSpec(
        image="img", command=["flower", "run"], env={"HOME": "/tmp"}, secrets=VALUES, user="1000:1000", **kw
    )  # type: ignore[arg-type]


def test_no_value_in_what_the_container_is_created_with() -> None:
    command, env, tmpfs = receiving(_spec())
    made = repr((command, env, tmpfs))
    assert not [v for v in VALUES.values() if v in made]
    assert env["ANTHROPIC_API_KEY_FILE"] == "/run/secrets/ANTHROPIC_API_KEY" and env["HOME"] == "/tmp"
    assert env["FB_SECRET_NAMES"] == "ANTHROPIC_API_KEY,GITHUB_TOKEN"
    assert tmpfs["/run/secrets"].endswith("mode=0700,uid=1000,gid=1000") and "/tmp" in tmpfs
    assert command[:2] == ["sh", "-c"] and command[-2:] == ["flower", "run"]


def test_a_command_that_reads_the_files_itself_gets_no_list() -> None:
    _, env, _ = receiving(_spec(secrets_as_env=False))
    assert "FB_SECRET_NAMES" not in env and env["GITHUB_TOKEN_FILE"] == "/run/secrets/GITHUB_TOKEN"


def _wait_script(folder: Path) -> str:
    return secret_handover.WAIT.replace(secret_handover.SECRETS_DIR, str(folder))


def test_the_wait_runs_the_command_with_the_listed_secrets_as_env(tmp_path: Path) -> None:
    for name, value in VALUES.items():
        (tmp_path / name).write_text(value)
    (tmp_path / ".delivered").write_text("")
    shown = subprocess.run(
        [
            "sh",
            "-c",
            _wait_script(tmp_path),
            "x",
            "sh",
            "-c",
            'echo "$GITHUB_TOKEN|${FB_SECRET_NAMES-unset}|$1"',
            "-",
            "arg",
        ],
        env={"PATH": "/usr/bin:/bin", "FB_SECRET_NAMES": "GITHUB_TOKEN"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert shown.stdout.strip() == f"{VALUES['GITHUB_TOKEN']}|unset|arg", shown.stderr


def test_the_wait_gives_up_in_one_line(tmp_path: Path) -> None:
    script = _wait_script(tmp_path).replace(
        f"-gt {int(secret_handover.WAIT_S / secret_handover.POLL_S)}", "-gt 2"
    )
    proc = subprocess.run(["sh", "-c", script, "x", "true"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 125
    assert proc.stderr.strip().splitlines() == [
        f"flower-batch: no secrets were handed to {tmp_path} within {secret_handover.WAIT_S}s"
    ]
