"""The `flower-batch` app is assembled in one place: importing it gives every command."""

from __future__ import annotations

import subprocess
import sys

import typer.main

COMMANDS = {"run", "wake", "ls", "status", "show", "logs", "stop", "gc", "image", "matrix", "report",
            "compare", "repro", "view"}


def test_the_app_has_every_command_without_importing_a_command_module_first() -> None:
    code = ("import typer.main\nfrom flower_batch.cli import app\n"
            "group = typer.main.get_command(app)\n"
            "print(' '.join(sorted(group.commands)))\n"
            "print(' '.join(sorted(group.commands['image'].commands)))")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    commands, image = shown.splitlines()
    assert set(commands.split()) == COMMANDS
    assert set(image.split()) == {"build", "show", "push"}


def test_a_command_module_imports_without_the_app() -> None:
    # The cycle cli -> matrix_cmd -> cli is gone: a command module loads on its own and leaves the app unloaded.
    code = ("import sys\nimport flower_batch.matrix_cmd, flower_batch.repro_cmd, flower_batch.jobs_cmd\n"
            "print('flower_batch.cli' in sys.modules)")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "False"


def test_main_is_the_console_entry_point() -> None:
    from flower_batch.cli import app, main

    assert callable(main)
    assert set(typer.main.get_command(app).commands) == COMMANDS  # type: ignore[attr-defined]
