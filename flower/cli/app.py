"""The `flower` command, assembled: `flower "task"` (go), `flower run TARGET`, `flower once "prompt"`.

Upstream's spellings are kept. The command modules (go, run, once) export plain functions and
never import this module; here they become commands of one click group, `GoByDefault`:

* the global options (-w, -r, -v, -W, -T, flower.cli.common) belong to the group and to
  every command, so they work before or after the subcommand;
* a first word that is not a subcommand, or no word at all, means `go` (upstream's default):
  `flower "do X"`, `flower --new "X"`, `flower --timeout 0` and plain `flower` all run go.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import typer
from rich.text import Text
from typer.core import TyperGroup
from typer.exceptions import TyperException

from flower.cli import terminal
from flower.cli.common import (
    HELP,
    G,
    RunDirOption,
    TrimOption,
    VerboseOption,
    WorkbenchOption,
    WorkspaceOption,
    err,
    leave,
    reset_globals,
    set_globals,
)
from flower.cli.display import is_scripted
from flower.cli.go import go
from flower.cli.limits import (
    BudgetOption,
    DeadlineOption,
    NoticesOption,
    TimeLimitOption,
    WordingOption,
    WrapUpOption,
)
from flower.cli.limits import record as record_limits
from flower.cli.once import once
from flower.cli.run import run
from flower.errors import FlowerError
from flower.flows.loader import add_flower_path
from flower.runtime import model_socket
from flower.versions import version_lines

DEFAULT_COMMAND = "go"
ARGV_KEY = "flower.argv"  # ctx.meta: the group's own argv, to see where a `--` stood


class GoByDefault(TyperGroup):
    """The group: global options, then a subcommand — `go` when the first word is none."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta[ARGV_KEY] = list(args)
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        if args[0] in self.commands or args[0] in HELP:
            return super().resolve_command(ctx, args)
        argv: list[str] = ctx.meta.get(ARGV_KEY, [])
        if "--" in argv and argv[argv.index("--") + 1 :] == args:
            args = ["--", *args]  # `flower -- "-x task"`: go must not read the words as options
        return DEFAULT_COMMAND, self.commands[DEFAULT_COMMAND], args

    def invoke(self, ctx: Any) -> Any:
        result = super().invoke(ctx)
        if ctx.invoked_subcommand is not None:
            return result
        command = self.commands[DEFAULT_COMMAND]  # plain `flower` (global options at most)
        with command.make_context(DEFAULT_COMMAND, [], parent=ctx) as sub_ctx:
            return command.invoke(sub_ctx)


def build_app() -> typer.Typer:
    """The `flower` app: the three commands on the go-by-default group."""
    app = typer.Typer(
        cls=GoByDefault,
        add_completion=True,  # typer's --install-completion / --show-completion
        no_args_is_help=False,
        rich_markup_mode=None,
        invoke_without_command=True,
        context_settings={"help_option_names": list(HELP), "ignore_unknown_options": True},
    )
    app.callback()(_group)
    for command in (once, run, go):
        app.command()(command)
    return app


def _show_version(value: bool) -> None:
    if value:
        print("\n".join(version_lines("flower")))
        raise typer.Exit(0)


def _group(
    workspace: WorkspaceOption = Path("."),
    run_dir: RunDirOption = Path("runs"),
    verbose: VerboseOption = False,
    workbench: WorkbenchOption = False,
    trim: TrimOption = False,
    deadline: DeadlineOption = None,
    time_limit: TimeLimitOption = None,
    budget_usd: BudgetOption = None,
    wrap_up: WrapUpOption = None,
    notices: NoticesOption = None,
    notice_wording: WordingOption = None,
    version: bool = typer.Option(
        False,
        "--version",
        callback=_show_version,
        is_eager=True,
        help="show the versions (flower, the SDK, its CLI, the runtime image inside one) and exit",
    ),
) -> None:
    """flower: a long-horizon agent workflow runtime on the real claude-agent-sdk."""
    reset_globals()
    set_globals(workspace, run_dir, verbose, workbench, trim)
    record_limits(deadline, time_limit, budget_usd, wrap_up, notices, notice_wording)


app = build_app()


def main(argv: list[str] | None = None) -> None:
    """Exit codes: 0 done (and --version, --help), 1 a step failed, 2 bad usage, 130 interrupted.
    Errors are one line."""
    args = list(sys.argv[1:] if argv is None else argv)
    G.environ = dict(os.environ)  # read here, where the process starts, and passed on from G
    terminal.take_ctrl_c()  # before any prompt: a launcher's ignored SIGINT is not the person's
    add_flower_path(G.environ.get("FLOWER_PATH", ""))  # where flower-batch puts the workflow code
    try:
        model_socket.start_from_env(G.environ)  # a job container with no network reaches its model so
    except (OSError, ValueError) as exc:
        err.print(f"flower: {model_socket.SOCKET_ENV}: {exc}", markup=False, highlight=False)
        sys.exit(2)
    try:
        code = app(args=args, prog_name="flower", standalone_mode=False)
    except TyperException as exc:  # usage errors (exit 2): one line, not a box
        message = " ".join(exc.format_message().split())
        ctx = getattr(exc, "ctx", None)
        hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
        err.print(f"flower: {message}{hint}", markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except FlowerError as exc:  # an error the person can fix: one line here, never in a command
        err.print(Text.assemble(("flower:", "red"), " ", str(exc)), highlight=False)
        leave(code=2, kind=exc.kind, reason=str(exc))
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        err.print("flower: interrupted")
        leave(code=130, kind="interrupted", reason="interrupted")
        sys.exit(130)
    except Exception as exc:  # a bug or an unforeseen error: keep the traceback, leave the cause
        leave(code=1, kind="crash", reason=f"{type(exc).__name__}: {exc}")
        raise
    sys.exit(code if isinstance(code, int) else 0)


__all__ = ["app", "main", "is_scripted"]
