"""The `flower-batch` app is assembled in one place: importing it gives every command."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import typer.main

COMMANDS = {
    "run",
    "wake",
    "init",
    "ls",
    "status",
    "show",
    "logs",
    "stop",
    "gc",
    "image",
    "matrix",
    "report",
    "compare",
    "repro",
    "view",
    "export",
}


def test_the_app_has_every_command_without_importing_a_command_module_first() -> None:
    code = (
        "import typer.main\nfrom flower_batch.cli import app\n"
        "group = typer.main.get_command(app)\n"
        "print(' '.join(sorted(group.commands)))\n"
        "print(' '.join(sorted(group.commands['image'].commands)))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    commands, image = shown.splitlines()
    assert set(commands.split()) == COMMANDS
    assert set(image.split()) == {"build", "show", "push"}


def test_a_command_module_imports_without_the_app() -> None:
    # The cycle cli -> matrix_cmd -> cli is gone: a command module loads on its own and leaves the app unloaded.
    code = (
        "import sys\nimport flower_batch.commands.matrix, flower_batch.commands.repro, flower_batch.commands.jobs\n"
        "print('flower_batch.cli' in sys.modules)"
    )
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

    internal = {
        "Interrupted",
        "BadRequest",
        "SessionsUnreadable",
        "_Killed",
    }  # never reach a user (errors.py)
    root = Path(flower_batch.__file__).parent
    stray = []
    for path in root.rglob("*.py"):
        if path.name == "errors.py" and path.parent == root:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ClassDef)
                and node.name not in internal
                and any(
                    isinstance(b, ast.Name)
                    and (b.id.endswith(("Error", "Exception")) or b.id in {"FlowerBatchError"})
                    for b in node.bases
                )
            ):
                stray.append(f"{path.relative_to(root)}:{node.name}")
    assert stray == []


def _rewraps_as_one_line(handler: ast.ExceptHandler) -> bool:
    """`except FlowerBatchError as exc: fail(str(exc))`: what OneLineErrors already does for every command."""
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    if not any(isinstance(n, ast.Name) and n.id == "FlowerBatchError" for n in names):
        return False
    first = handler.body[0]
    return (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Call)
        and isinstance(first.value.func, ast.Name)
        and first.value.func.id == "fail"
        and ast.unparse(first.value.args[0]) == f"str({handler.name})"
    )


def test_no_command_module_turns_our_errors_into_one_line_itself() -> None:
    import flower_batch

    modules = sorted((Path(flower_batch.__file__).parent / "commands").glob("*.py"))
    assert {"jobs.py", "matrix.py", "common.py"} <= {path.name for path in modules}
    found = [
        f"{path.name}:{node.lineno}"
        for path in modules
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ExceptHandler) and node.type is not None and _rewraps_as_one_line(node)
    ]
    assert found == []
    sample = ast.parse("try:\n    x()\nexcept FlowerBatchError as exc:\n    fail(str(exc))\n    raise\n")
    assert [_rewraps_as_one_line(n) for n in ast.walk(sample) if isinstance(n, ast.ExceptHandler)] == [True]


def _main_with(args: list[str], before: str = "") -> subprocess.CompletedProcess[str]:
    """`flower-batch ARGS` through the console entry point, with an exit handler that says it ran."""
    code = (
        "import atexit, sys\nfrom flower_batch.cli import main\n"
        "atexit.register(lambda: print('exit handler ran', flush=True))\n"
        f"{before}sys.argv = ['flower-batch', *{args!r}]\nmain()"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_the_quick_exit_keeps_the_code_the_output_and_the_exit_handlers() -> None:
    # main() ends the process without the interpreter's module teardown: what a command printed
    # and its exit code must come out the same, and exit handlers still run.
    shown = _main_with(["--version"])
    assert shown.returncode == 0
    assert shown.stdout.startswith("flower-batch ") and shown.stdout.rstrip().endswith("exit handler ran")
    # far more than a pipe holds, written without a newline: only a flush gets it out
    many = _main_with(["--help"], before="sys.stdout.write('x' * 300_000)\n")
    assert many.returncode == 0 and many.stdout.count("x") >= 300_000 and "Usage" in many.stdout
    refused = _main_with(["run", "/no/such/folder"])
    assert refused.returncode == 2 and "/no/such/folder" in refused.stderr
    assert "exit handler ran" in refused.stdout


def test_the_quick_exit_steps_aside_while_another_thread_runs() -> None:
    # a (non-daemon) thread still running when the command ends keeps the interpreter's exit, which waits for it
    waits = "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), print('thread done'))).start()\n"
    shown = _main_with(["--version"], before=waits)
    assert shown.returncode == 0 and "thread done" in shown.stdout
