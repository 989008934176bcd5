"""`flower once "prompt"`: one question, one session, no Workflow."""

from __future__ import annotations

import anyio
import typer

from flower import exitinfo
from flower.cli.common import (
    PERMISSION_MODES,
    G,
    RunDirOption,
    TrimOption,
    VerboseOption,
    WorkbenchOption,
    WorkspaceOption,
    ended,
    fail,
    interrupted,
    make_runtime,
    set_globals,
)
from flower.cli.display import Display
from flower.cli.limits import (
    DeadlineOption,
    NoticesOption,
    OnceBudgetOption,
    TimeLimitOption,
    WordingOption,
    WrapUpOption,
)
from flower.cli.limits import record as record_limits
from flower.runtime import signals
from flower.spec import AgentSpec


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
    workspace: WorkspaceOption = None,
    run_dir: RunDirOption = None,
    verbose: VerboseOption = False,
    workbench: WorkbenchOption = False,
    trim: TrimOption = False,
    deadline: DeadlineOption = None,
    time_limit: TimeLimitOption = None,
    budget_usd: OnceBudgetOption = None,
    wrap_up: WrapUpOption = None,
    notices: NoticesOption = None,
    notice_wording: WordingOption = None,
) -> None:
    """One question, one session: no Workflow, no lineage."""
    set_globals(workspace, run_dir, verbose, workbench, trim)
    record_limits(deadline, time_limit, budget_usd, wrap_up, notices, notice_wording)
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
    raise typer.Exit(
        ended({"_failed_at": None if result.ok else result.step, "_results": {result.step: result}})
    )
