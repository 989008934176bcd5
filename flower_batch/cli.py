"""The `flower-batch` command, assembled: run / wake / ls / show / logs / stop / gc / image, matrix,
report, compare, repro, view, export.

The command modules (flower_batch/commands/: jobs, image, matrix, compare, repro, view) export
plain functions and never import this module; what they share lives in commands/common. Here they
become commands of one typer app, so `from flower_batch.cli import app` always has them all.
Errors: what flower_batch/errors.py draws under FlowerBatchError becomes one line (OneLineErrors);
everything else is a bug and keeps its traceback. `flower_batch.cli:main` is the console entry
point (pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup

from flower_batch.commands.common import fail
from flower_batch.commands.compare import compare
from flower_batch.commands.export import export
from flower_batch.commands.image import image_build, image_push, image_show
from flower_batch.commands.jobs import gc, logs, ls, run, show, stop, wake
from flower_batch.commands.matrix import matrix, report
from flower_batch.commands.repro import repro
from flower_batch.commands.version import VERSION_OPT
from flower_batch.commands.view import view

from .errors import FlowerBatchError


class OneLineErrors(TyperGroup):
    """The group every command runs in, and the one place a FlowerBatchError becomes one line:
    its message and the code it carries (2). Commands do not catch them to say the same; they
    catch one only to add what it was doing. Any other exception surfaces as the bug it is."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except FlowerBatchError as exc:
            fail(str(exc), exc.exit_code)


def build_app() -> typer.Typer:
    """The `flower-batch` app: every command, and the `image` group."""
    app = typer.Typer(
        cls=OneLineErrors,
        add_completion=True,  # typer's --install-completion / --show-completion (commands/completion.py)
        no_args_is_help=True,
        rich_markup_mode=None,
        help="Run flower workflows in pinned containers: one job, a matrix, a reproduction.",
    )
    app.callback()(_options)
    image_app = typer.Typer(no_args_is_help=True, help="The runtime image.")
    app.add_typer(image_app, name="image")
    for command in (run, wake, ls):
        app.command()(command)
    app.command("status", help="Same as ls.")(ls)  # right after ls in --help, as before
    commands: tuple[Callable[..., None], ...] = (
        show,
        logs,
        stop,
        gc,
        matrix,
        report,
        compare,
        repro,
        view,
        export,
    )
    for command in commands:
        app.command()(command)
    image_app.command("build")(image_build)
    image_app.command("show")(image_show)
    image_app.command("push")(image_push)
    return app


def _options(version: bool = VERSION_OPT) -> None:
    """Run flower workflows in pinned containers: one job, a matrix, a reproduction."""


app = build_app()


def main() -> None:
    app(prog_name="flower-batch")
