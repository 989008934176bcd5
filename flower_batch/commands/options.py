"""The command line's options, declared once (`Annotated` aliases) and shared by the commands
that take them: a command's signature then reads as the list of what it takes.

The three budget options say what each caps: a job's own spend (`run`), the whole batch's
(`matrix`), and a woken job's new cap or +N (`wake`); all are metered by the gateway, which
refuses a request once the cap is reached (jobmodel/budget.py decides "reached").
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flower_batch.commands.completion import complete_batch
from flower_batch.jobsfile import MAX_JOBS

UPSTREAM_HELP = (
    "anthropic mode (no --scenario): the Messages API to forward to (default "
    "$FLOWER_BATCH_UPSTREAM, else https://api.anthropic.com)"
)
Upstream = Annotated[str | None, typer.Option("--upstream", help=UPSTREAM_HELP)]

# -- one job (`run`) --------------------------------------------------------------------------
Workspace = Annotated[Path, typer.Argument(help="folder copied fresh into the job's /workspace")]
TaskText = Annotated[str | None, typer.Argument(help="task text for flower's starter flow")]
Workflow = Annotated[
    str | None, typer.Option("--workflow", "-f", help="module:attr or file.py:attr of a Workflow")
]
Prompt = Annotated[
    str | None, typer.Option("--prompt", help="with --workflow: text given to it as ctx['prompt']")
]
DEFAULT_IMAGE = "flower-batch-runtime:latest"
Image = Annotated[
    str,
    typer.Option(
        "--image",
        help="the image to run in (tag or id; its id is pinned): flower-batch's runtime image, or "
        "any x86_64 glibc image of yours, flower brought in (docs/environments.md)",
    ),
]
Build = Annotated[
    Path | None,
    typer.Option(
        "--build",
        help="a folder with a Dockerfile: the job runs in the image built from it (once per content)",
    ),
]
Timeout = Annotated[
    str, typer.Option("--timeout", help="stop the job after this long (SIGTERM, grace, kill)")
]
Cpus = Annotated[float | None, typer.Option("--cpus")]
Memory = Annotated[str | None, typer.Option("--memory", help="e.g. 2g")]
Disk = Annotated[
    str | None,
    typer.Option(
        "--disk",
        help="what the job may write: workspace, runs, /tmp, its check (e.g. 2g; default 10g)",
    ),
]
Pids = Annotated[
    int | None, typer.Option("--pids", help="processes and threads the job may hold (default 2048)")
]
Network = Annotated[
    str,
    typer.Option(
        "--network",
        help="gateway: the model only; internet: also a route out, for jobs that install packages "
        "(shown in the record)",
    ),
]
Env = Annotated[list[str], typer.Option("--env", "-e", help="KEY=VALUE for the job (repeatable)")]
Secret = Annotated[
    list[str], typer.Option("--secret", help="NAME of a host env var passed to the job, never stored")
]
Name = Annotated[str | None, typer.Option("--name", help="job id (default: from the task)")]
Check = Annotated[
    str | None,
    typer.Option(
        "--check",
        help="a shell command run in the job's workspace after it: exit 0 = passed (as jobs.toml's check)",
    ),
]
Exclude = Annotated[
    list[str],
    typer.Option(
        "--exclude", help="a path pattern left out of the workspace copy (repeatable; as .flowerbatchignore)"
    ),
]
WorkspaceLimit = Annotated[
    str | None,
    typer.Option(
        "--workspace-limit",
        help='the most workspace the job copies ("2g"; default 200m); "none": no size limit',
    ),
]
Persistent = Annotated[
    bool, typer.Option("--persistent", help="keep the conversation so `wake` can continue it")
]
Scenario = Annotated[
    Path | None,
    typer.Option(
        "--scenario",
        help="scripted-model scenario for the gateway (without it: the Anthropic API via the gateway, "
        "with your ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN, which stays on the host side)",
    ),
]
JobBudget = Annotated[
    float | None,
    typer.Option(
        "--budget-usd",
        help="this job's cap in US dollars: its gateway refuses requests once the job's metered spend "
        "reaches it (the job ends `budget`, or `paused` with --persistent)",
    ),
]
Placement = Annotated[
    list[str],
    typer.Option("--placement", help="on a cluster: a constraint such as node.labels.pool==big (repeatable)"),
]

# -- a matrix (`matrix`) ----------------------------------------------------------------------
JobsFile = Annotated[Path, typer.Argument(help="the jobs.toml describing tasks, variants and repeats")]
Parallel = Annotated[int, typer.Option("-j", "--parallel", help="at most this many jobs at once")]
MatrixImage = Annotated[
    str | None,
    typer.Option("--image", help="runtime image (default: jobs.toml's, else flower-batch-runtime:latest)"),
]
RetryFailed = Annotated[bool, typer.Option("--retry-failed", help="also re-run failed/timed-out jobs")]
Fresh = Annotated[bool, typer.Option("--fresh", help="re-run every job, ignoring earlier results")]
FailUnder = Annotated[
    float | None, typer.Option("--fail-under", help="exit 0 if the pass rate is at least this (0..1)")
]
DryRun = Annotated[bool, typer.Option("--dry-run", help="show the plan and exit")]
OnlyTasks = Annotated[
    list[str],
    typer.Option(
        "-i", "--include-tasks", help="only the tasks whose name matches this glob, e.g. 'fix-*' (repeatable)"
    ),
]
SkipTasks = Annotated[
    list[str],
    typer.Option(
        "-x", "--exclude-tasks", help="leave out the tasks whose name matches this glob (repeatable)"
    ),
]
BatchBudget = Annotated[
    float | None,
    typer.Option(
        "--budget-usd",
        help="the whole batch's cap in US dollars (overrides [batch].budget_usd): its gateways refuse "
        "requests once the batch's metered spend reaches it, and jobs not started by then are skipped",
    ),
]
Baseline = Annotated[
    str | None,
    typer.Option(
        "--baseline",
        help="compare with this batch or results.json at the end (report.html, table, summary)",
        autocompletion=complete_batch,
    ),
]
InfraRetries = Annotated[
    int,
    typer.Option(
        "--infra-retries", help="re-run jobs that ended in an infrastructure error, at most this many times"
    ),
]
Reserve = Annotated[
    str | None,
    typer.Option(
        "--reserve",
        help="free space kept on the home's disk: under it no new job starts (skipped) "
        "(e.g. 2g; default 64m a job at once, at least 1g)",
    ),
]
AllowLarge = Annotated[bool, typer.Option("--allow-large", help=f"allow more than {MAX_JOBS:,} jobs")]

# -- a woken job (`wake`) ---------------------------------------------------------------------
WakeBudget = Annotated[
    str | None,
    typer.Option(
        "--budget-usd",
        help="the job's new cap in US dollars (metered over all its runs), or +N to add N to the "
        "cap: continues a job paused at its budget",
    ),
]
WakeDisk = Annotated[
    str | None,
    typer.Option(
        "--disk",
        help="the job's own disk from now on, e.g. 20g: continues a job that ended at its disk's limit",
    ),
]
Root = Annotated[
    str,
    typer.Option(
        "--root",
        help="read-only (the default) or writable: the job may change the image's files (bounded by its "
        "memory; kept for wake)",
    ),
]
RunAs = Annotated[
    str,
    typer.Option(
        "--user", help="sandbox (the default) or root: uid 0 with the capabilities package managers need"
    ),
]
Workdir = Annotated[
    str | None,
    typer.Option(
        "--workdir", help='where the workspace is in the container (default /workspace); "image": its WORKDIR'
    ),
]
Tests = Annotated[
    Path | None,
    typer.Option(
        "--tests",
        help="hidden tests: a folder with test.sh, run at /tests after the workflow; its reward.txt or "
        "reward.json decides the pass",
    ),
]
PassReward = Annotated[
    float | None,
    typer.Option("--pass-reward", help="the reward a job with --tests needs to pass (default 1.0)"),
]
Oracle = Annotated[
    bool,
    typer.Option(
        "--oracle",
        help="run each Harbor task's solution/solve.sh instead of a workflow (no model, $0), then its "
        "hidden tests, in <batch>-oracle; lists every task not solved (exit 1)",
    ),
]
