"""How a local container is made to receive its secrets (docker/secret_handover.py): nothing the
engine is given to create it — command, env, tmpfs options — holds a value; the receiving sh
unpacks the values from stdin, runs the command with the listed ones as env, and gives up in
one line when none or only part arrive."""

from __future__ import annotations

import os
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


def _receive_script(folder: Path, wait_s: int = secret_handover.WAIT_S) -> str:
    return secret_handover.RECEIVE.replace(secret_handover.SECRETS_DIR, str(folder)).replace(
        f"timeout {secret_handover.WAIT_S} ", f"timeout {wait_s} "
    )


def _receive(
    folder: Path, stdin: bytes | None, *command: str, wait_s: int = secret_handover.WAIT_S
) -> tuple[int | None, str, str]:
    """The receiving sh as the container runs it, `stdin` its attached stdin (None: nobody ever
    writes or closes it, as when no one attached)."""
    proc = subprocess.Popen(
        ["sh", "-c", _receive_script(folder, wait_s), "x", *command],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "FB_SECRET_NAMES": "GITHUB_TOKEN"},
    )
    if stdin is not None:
        out, err = proc.communicate(stdin, timeout=30)
        return proc.returncode, out.decode(), err.decode()
    try:
        proc.wait(timeout=30)  # stdin left open: the wait ends it
        assert proc.stdout is not None and proc.stderr is not None
        return proc.returncode, proc.stdout.read().decode(), proc.stderr.read().decode()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()


def test_the_tar_on_stdin_becomes_0400_files_and_the_listed_ones_env(tmp_path: Path) -> None:
    values = {**VALUES, "PEM": "-----BEGIN-----\nline two\n-----END-----\n"}
    code, out, err = _receive(
        tmp_path,
        secret_handover.secrets_tar(values),
        "sh",
        "-c",
        'echo "$GITHUB_TOKEN|${FB_SECRET_NAMES-unset}|$1"; cat; echo "<stdin ends>"',
        "-",
        "arg",
    )
    assert (code, out.strip()) == (0, f"{VALUES['GITHUB_TOKEN']}|unset|arg\n<stdin ends>"), err
    for name, value in values.items():
        assert (tmp_path / name).read_text() == value  # any bytes, exactly
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o400


def test_no_hand_over_gives_up_in_one_line(tmp_path: Path) -> None:
    code, _, err = _receive(tmp_path, None, "true", wait_s=1)
    assert code == 125
    assert err.strip().splitlines() == [
        f"flower-batch: no secrets were handed to {tmp_path} within {secret_handover.WAIT_S}s"
    ]


def test_a_hand_over_cut_short_runs_nothing(tmp_path: Path) -> None:
    blob = secret_handover.secrets_tar(VALUES)
    code, out, err = _receive(tmp_path, blob[:700], "echo", "ran")
    assert (code, out) == (125, "")
    assert err.strip().splitlines() == [f"flower-batch: the secrets handed to {tmp_path} were cut short"]


def test_the_command_keeps_the_containers_umask(tmp_path: Path) -> None:
    # the 0400 files' umask is the unpacking's only: a gateway makes folders it writes into
    mine = os.umask(0o022)
    os.umask(mine)
    code, out, err = _receive(tmp_path, secret_handover.secrets_tar(VALUES), "sh", "-c", "umask")
    assert (code, out.strip()) == (0, f"{mine:04o}") and mine != 0o377, err
