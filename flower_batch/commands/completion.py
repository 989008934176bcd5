"""Shell completion of what the commands name: job references (`show`, `wake`, `logs`, `stop`,
`repro`) and batch names (`report`, `compare`, `view`, `--batch`, `--baseline`), read from the
home the command line names (`--home`, else $FLOWER_BATCH_HOME, else ./volumes) by layout.py's
bounded scans. Typer's own mechanism calls them (`--install-completion`, `--show-completion`)."""

from __future__ import annotations

import os

import typer

from flower_batch.layout import Home, home_root


def _home(ctx: typer.Context) -> Home:
    """The home the command line names (read here: completion is where the process starts)."""
    return Home(home_root(ctx.params.get("home"), os.environ))


def complete_job(ctx: typer.Context, incomplete: str) -> list[str]:
    return _home(ctx).job_refs(incomplete)


def complete_batch(ctx: typer.Context, incomplete: str) -> list[str]:
    return _home(ctx).batch_names(incomplete)
