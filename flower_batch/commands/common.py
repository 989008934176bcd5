"""What every `flower-batch` command shares: the consoles, one-line failure, the --home and
--backend options, job lookup, the runtime image, and the signal-aware async runner.

Command modules (*_cmd.py) import from here and never from flower_batch.cli, which only
assembles them into the app: so importing a command module never needs the app, and the app
always has every command.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import typer
from rich.console import Console
from rich.markup import escape

from flower_batch.backend.base import Backend
from flower_batch.backend.docker.loopback_hosts import cache_folder
from flower_batch.backend.select import BACKEND_ENV, REGISTRY_ENV, backend_name, open_backend
from flower_batch.errors import FlowerBatchError, home_full, no_space
from flower_batch.gateway.host.setup import use_upstream
from flower_batch.gateway.host.sidecar import GatewaySettings
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.status import Status
from flower_batch.layout import HOME_ENV, Home, JobDir, home_root
from flower_batch.running.liveness import NEVER_STARTED, ORPHANED

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> None:
    err.print(f"[red]flower-batch:[/red] {escape(message)}")
    raise typer.Exit(code)


HOME_OPT = typer.Option(None, "--home", help="where batches live (default ./volumes or $FLOWER_BATCH_HOME)")
BACKEND_OPT = typer.Option(
    None,
    "--backend",
    help="docker (this engine) or swarm (a cluster's manager via "
    "DOCKER_HOST); default $FLOWER_BATCH_BACKEND, else jobs.toml's, else docker",
)


def host_settings(upstream: str | None = None) -> GatewaySettings:
    """The host's environment, read here where the command starts (with `--upstream URL` as
    FLOWER_BATCH_UPSTREAM in the command's copy of it, never in os.environ), and what it says
    of the gateways: handed down to everything the command starts."""
    environ = dict(os.environ)
    if problem := use_upstream(upstream, environ):
        fail(problem)
    return GatewaySettings.from_environ(environ)  # a bad size or count: one line (cli.OneLineErrors)


def backend_for(home: Path | None, flag: str | None = None, recorded: str | None = None) -> Backend:
    """The engine to run on (see backend/select.py); a bad choice is a BackendChoiceError (one line)."""
    return open_named(chosen_backend(flag, recorded), home_at(home).root)


def chosen_backend(flag: str | None, recorded: str | None) -> str:
    """--backend, else $FLOWER_BATCH_BACKEND (read here, where the command starts), else `recorded`."""
    return backend_name(flag, os.environ.get(BACKEND_ENV), recorded)


def open_named(name: str, root: Path) -> Backend:
    """The backend `name` names, with the cluster's registry from $FLOWER_BATCH_REGISTRY."""
    return open_backend(name, root, registry=cluster_registry_setting(), cache=user_cache())


def cluster_registry_setting() -> str | None:
    """$FLOWER_BATCH_REGISTRY: the registry a cluster's nodes pull from (None: not set)."""
    return os.environ.get(REGISTRY_ENV) or None


def user_cache() -> Path | None:
    """$XDG_CACHE_HOME or ~/.cache, read here where the command starts (for loopback_hosts)."""
    return cache_folder(os.environ)


def home_named(path: Path | None) -> bool:
    """Whether the home was named (--home, $FLOWER_BATCH_HOME), not the default ./volumes."""
    return path is not None or bool(os.environ.get(HOME_ENV))


def home_at(path: Path | None) -> Home:
    """--home, else $FLOWER_BATCH_HOME, else ./volumes: read here, where the command starts."""
    return Home(home_root(path, os.environ))


def load_job(home: Path | None, ref: str) -> tuple[JobDir, JobRecord]:
    try:
        jd = home_at(home).find(ref)
        return jd, jd.record()
    except FileNotFoundError:
        fail(f"job {ref}: its record.json is missing (see `flower-batch ls`)")
    raise AssertionError("unreachable")


def progress(job_id: str, state: str) -> None:
    err.print(f"[cyan]{time.strftime('%H:%M:%S')}[/cyan] {escape(job_id)}: {escape(state)}")


def status_cell(status: str) -> str:
    colour = {
        Status.PASSED: "green",
        Status.RUNNING: "cyan",
        Status.QUEUED: "cyan",
        ORPHANED: "yellow",
        NEVER_STARTED: "yellow",
        Status.PAUSED: "yellow",  # resumable: a higher budget continues it
    }.get(status, "red")
    return f"[{colour}]{status}[/{colour}]"


class Interrupted(Exception):
    """The command was stopped by a signal; `signum` says which (the exit code is 128 + it)."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signum)
        self.signum = signum


def _stopped_exit(signum: int) -> typer.Exit:
    """What a stopped command says and exits with: 130 after Ctrl-C, 143 after SIGTERM (as a
    shell reports a process a signal ended; CI systems cancel with SIGTERM)."""
    name = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
    err.print(
        f"flower-batch: stopped by {name}; the jobs' containers are stopped and their records written",
        markup=False,
    )
    return typer.Exit(128 + signum)


def _leaf_errors(exc: BaseException) -> Iterator[BaseException]:
    """The errors inside (nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaf_errors(inner)
    else:
        yield exc


def run_async(fn: Any) -> Any:
    """Run `fn` so that Ctrl-C / SIGTERM cancel it cleanly: every running job's container is
    stopped (flower records the in-flight step) and its record written before we exit 130."""

    async def main() -> Any:
        result: list[Any] = []
        failure: list[Exception] = []
        stopped: int | None = None  # the signal that stopped it
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                nonlocal stopped
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for signum in signals:
                        err.print("flower-batch: stopping — stopping containers and writing records")
                        stopped = int(signum)
                        tg.cancel_scope.cancel()
                        return

            async def work() -> None:
                try:
                    result.append(await fn())
                except Exception as exc:  # re-raised below, outside the task group's ExceptionGroup
                    failure.append(exc)
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            tg.start_soon(work)
        if failure:
            raise failure[0]
        if stopped is not None:
            raise Interrupted(stopped)
        return result[0] if result else None

    try:
        return anyio.run(main)
    except BaseExceptionGroup as group:
        # A task group's failure: when every error in it is ours, say the first in one line.
        leaves = [home_full(e) if isinstance(e, OSError) and no_space(e) else e for e in _leaf_errors(group)]
        if leaves and all(isinstance(e, FlowerBatchError) for e in leaves):
            first = leaves[0]
            fail(" ".join(str(first).split()), getattr(first, "exit_code", 2))
        if leaves and all(isinstance(e, Interrupted | KeyboardInterrupt) for e in leaves):
            first = leaves[0]
            raise _stopped_exit(first.signum if isinstance(first, Interrupted) else signal.SIGINT) from None
        raise
    except Interrupted as stop:
        raise _stopped_exit(stop.signum) from None
    except KeyboardInterrupt:
        raise _stopped_exit(signal.SIGINT) from None
