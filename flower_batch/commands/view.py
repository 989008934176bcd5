"""`flower-batch view [BATCH]`: the trajectory viewer (flower_batch/view/), served on 127.0.0.1."""

from __future__ import annotations

import errno
import webbrowser
from pathlib import Path

import typer

from flower_batch.commands.common import HOME_OPT, err, fail, home_at
from flower_batch.commands.completion import complete_batch
from flower_batch.view.server import ViewServer

DEFAULT_PORT = 8765


def view(
    batch: str | None = typer.Argument(
        None, help="batch to open first (default: the list of batches)", autocompletion=complete_batch
    ),
    port: int | None = typer.Option(
        None,
        "--port",
        help=f"port on 127.0.0.1 (default {DEFAULT_PORT}, or a free one if that is taken; 0 = any free port)",
    ),
    open_browser: bool = typer.Option(False, "--open", help="open the page in the default browser"),
    home: Path | None = HOME_OPT,
) -> None:
    """Browse batches, jobs and each job's steps (messages, tool calls, judge rounds, handoffs, diff), live."""
    h = home_at(home)
    if batch is not None and not h.batch_dir(batch).is_dir():
        fail(f"no batch {batch} under {h.root} (see `flower-batch ls`)")
    if port is not None and not 0 <= port <= 65535:
        fail(f"--port {port}: give a port between 1 and 65535, or 0 for any free port")
    try:
        server = ViewServer(h, DEFAULT_PORT if port is None else port)
    except OSError as exc:
        if port is not None or exc.errno != errno.EADDRINUSE:
            fail(
                f"cannot listen on 127.0.0.1:{port if port is not None else DEFAULT_PORT}: {exc.strerror or exc}"
            )
        server = ViewServer(h, 0)  # the default port is busy: any free one will do
    server.warm_up()
    url = server.url + (f"#batch={batch}" if batch else "")
    print(f"flower-batch view: {url}  (home {h.root}; read-only; Ctrl-C to stop)", flush=True)
    if open_browser:
        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        err.print("stopped")
    finally:
        server.server_close()
