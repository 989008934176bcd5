"""The `flower-batch` command, assembled: init / run / wake / ls / show / logs / stop / gc / image, matrix,
report, compare, repro, view, export.

The command modules (flower_batch/commands/: jobs, image, matrix, compare, repro, view) export
plain functions and never import this module; what they share lives in commands/common. Here they
become commands of one typer app, so `from flower_batch.cli import app` always has them all.
Errors: what flower_batch/errors.py draws under FlowerBatchError becomes one line (OneLineErrors);
everything else is a bug and keeps its traceback. `flower_batch.cli:main` is the console entry
point (pyproject.toml).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

import typer
from typer.core import TyperGroup

from flower.quick_exit import run_then_exit
from flower_batch.commands.common import fail
from flower_batch.commands.version import VERSION_OPT

from .errors import FlowerBatchError, home_full, no_space

# Each command: (name, module under flower_batch.commands, function), in --help's order. A command
# line that names one imports only its module (`main`): `run` starts without compare, export,
# reports and view (about a quarter of a second of every job's start).
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("init", "init", "init"),
    ("run", "jobs", "run"),
    ("wake", "jobs", "wake"),
    ("ls", "jobs", "ls"),
    ("status", "jobs", "ls"),  # help: "Same as ls."
    ("show", "jobs", "show"),
    ("logs", "jobs", "logs"),
    ("stop", "jobs", "stop"),
    ("gc", "jobs", "gc"),
    ("matrix", "matrix", "matrix"),
    ("report", "matrix", "report"),
    ("compare", "compare", "compare"),
    ("repro", "repro", "repro"),
    ("view", "view", "view"),
    ("export", "export", "export"),
)
IMAGE_COMMANDS = (("build", "image_build"), ("show", "image_show"), ("push", "image_push"))


def _command(module: str, name: str) -> Callable[..., None]:
    found: Callable[..., None] = getattr(importlib.import_module(f"flower_batch.commands.{module}"), name)
    return found


class OneLineErrors(TyperGroup):
    """The group every command runs in, and the one place a FlowerBatchError becomes one line:
    its message and the code it carries (2). Commands do not catch them to say the same; they
    catch one only to add what it was doing. Any other exception surfaces as the bug it is."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except FlowerBatchError as exc:
            fail(str(exc), exc.exit_code)
        except OSError as exc:
            if not no_space(exc):
                raise
            full = home_full(exc)
            fail(str(full), full.exit_code)


def build_app(only: str | None = None) -> typer.Typer:
    """The `flower-batch` app: every command, and the `image` group; `only`: just that one (the
    command a command line names), with the same options, help and errors."""
    app = typer.Typer(
        cls=OneLineErrors,
        add_completion=True,  # typer's --install-completion / --show-completion (commands/completion.py)
        no_args_is_help=True,
        rich_markup_mode=None,
        help="Run flower workflows in pinned containers: one job, a matrix, a reproduction.",
    )
    app.callback()(_options)
    if only in (None, "image"):
        image_app = typer.Typer(no_args_is_help=True, help="The runtime image.")
        app.add_typer(image_app, name="image")
        for name, function in IMAGE_COMMANDS:
            image_app.command(name)(_command("image", function))
    for name, module, function in COMMANDS:
        if only in (None, name):
            app.command(name, help="Same as ls." if name == "status" else None)(_command(module, function))
    return app


def invoked(args: Sequence[str]) -> str | None:
    """The command a command line names (its first word that is no option: the app's own options
    are flags), or None: then the whole app (help, completion, a mistyped name)."""
    first = next((a for a in args if not a.startswith("-")), None)
    return first if first == "image" or any(first == name for name, _, _ in COMMANDS) else None


def _options(version: bool = VERSION_OPT) -> None:
    """Run flower workflows in pinned containers: one job, a matrix, a reproduction."""


def __getattr__(name: str) -> Any:
    """`app`: the whole app, built when first asked for (`from flower_batch.cli import app`)."""
    if name == "app":
        globals()["app"] = built = build_app()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    run_then_exit(lambda: build_app(only=invoked(sys.argv[1:]))(prog_name="flower-batch"))
