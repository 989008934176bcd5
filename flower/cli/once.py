"""`flower once "prompt"`: one question, one session, no Workflow."""

from __future__ import annotations

import anyio
import typer

from flower import exitinfo
from flower.cli.common import PERMISSION_MODES, G, ended, fail, interrupted, make_runtime
from flower.cli.display import Display
from flower.cli.limits import OnceBudgetOption
from flower.cli.shared import shared_options
from flower.runtime import signals
from flower.spec import AgentSpec


@shared_options(budget=OnceBudgetOption)
def once(
    prompt: str = typer.Argument(..., help="what to ask"),
    tools: str = typer.Option(
        "Read,Glob,Grep", "-t", "--tools", help="comma-separated tools the agent may use"
    ),
    permission_mode: str = typer.Option(
        "default",
        "-p",
        "--permission-mode",
        help="default | acceptEdits | plan | bypassPermissions | dontAsk",
    ),
    resume: str | None = typer.Option(None, "--resume", help="continue this session id"),
    fork: bool = typer.Option(False, "--fork", help="with --resume: branch into a new session"),
) -> None:
    """One question, one session: no Workflow, no lineage."""
    exitinfo.clear(G.run_dir)
    if fork and not resume:
        fail("--fork needs --resume <session id>")
    if permission_mode not in PERMISSION_MODES:
        fail(f"-p {permission_mode!r}: use one of {', '.join(PERMISSION_MODES)}")
    rt = make_runtime()  # its limits: --budget-usd/-b (checked there), typed or from the environment
    spec = AgentSpec(
        "once",
        allowed_tools=[t.strip() for t in tools.split(",") if t.strip()],
        permission_mode=permission_mode,
        max_budget_usd=rt.limits.budget_usd,  # the one budget, the CLI's own cap here as upstream's -b
    )
    display = Display(verbose=G.verbose)
    try:
        # Same signals as `run`: one Ctrl-C interrupts and continues, SIGTERM/SIGHUP rescue the step.
        with signals.install(rt, ask=signals.ask_on_terminal()):
            result = anyio.run(lambda: rt.run(spec, prompt, resume=resume, fork=fork, on_event=display.event))
    except KeyboardInterrupt:
        interrupted("interrupted")
    finally:
        rt.close()
    display.final_text(result)
    display.summary(rt)
    full = rt.full_disk  # its row or session not saved: said as for a workflow (flower.full_disk)
    disk_full = (result.step, full.reason(None)) if full.first else None
    raise typer.Exit(
        ended(
            {
                "_failed_at": None if result.ok else result.step,
                "_results": {result.step: result},
                "_disk_full": disk_full,
            }
        )
    )
