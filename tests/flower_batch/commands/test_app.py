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
    code = ("import sys\nimport flower_batch.commands.matrix, flower_batch.commands.repro, flower_batch.commands.jobs\n"
            "print('flower_batch.cli' in sys.modules)")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "False"


def test_main_is_the_console_entry_point() -> None:
    from flower_batch.cli import app, main

    assert callable(main)
    assert set(typer.main.get_command(app).commands) == COMMANDS  # type: ignore[attr-defined]


def _app_raising(exc: BaseException) -> typer.Typer:
    from flower_batch.cli import OneLineErrors

    app = typer.Typer(cls=OneLineErrors)

    @app.command()
    def boom() -> None:
        raise exc

    @app.command()
    def other() -> None:  # two commands: `boom` stays a subcommand, run inside the group
        pass

    return app


def test_an_uncaught_flower_batch_error_is_one_line_and_its_exit_code() -> None:
    from typer.testing import CliRunner

    from flower_batch.errors import FlowerBatchError, RecordError

    class Carries3(FlowerBatchError):
        exit_code = 3

    result = CliRunner().invoke(_app_raising(RecordError("record.json: status: expected a string")), ["boom"])
    assert result.exit_code == 2
    assert result.output.strip() == "flower-batch: record.json: status: expected a string"
    assert CliRunner().invoke(_app_raising(Carries3("x")), ["boom"]).exit_code == 3


def test_any_other_exception_surfaces_as_a_bug() -> None:
    from typer.testing import CliRunner

    result = CliRunner().invoke(_app_raising(TypeError("a bug")), ["boom"])
    assert isinstance(result.exception, TypeError)
    assert result.exit_code == 1


def test_every_error_class_of_the_package_lives_in_errors_py() -> None:
    # The tree is in one place: no other module of flower_batch defines a user-facing error.
    import ast
    from pathlib import Path

    import flower_batch

    internal = {"Interrupted", "BadRequest", "SessionsUnreadable", "_Killed"}  # never reach a user (errors.py)
    root = Path(flower_batch.__file__).parent
    stray = []
    for path in root.rglob("*.py"):
        if path.name == "errors.py" and path.parent == root:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name not in internal and any(
                    isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception")) or b.id in {"FlowerBatchError"})
                    for b in node.bases):
                stray.append(f"{path.relative_to(root)}:{node.name}")
    assert stray == []
