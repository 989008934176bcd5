"""Ready-made roles: coordinator, worker, clarify, judge, oracle — and the guards they need.

A role is an AgentSpec (or, for a worker, the SDK's AgentDefinition) with the right tools, rules
and guards. Guards are PreToolUse hooks, because tool *visibility* cannot do the job: the CLI's
``--tools`` list is one pool for the whole session, subagents included, so a coordinator whose
workers write files must have Write in its pool. The delegate-only guard therefore denies
Write/Edit on the coordinator's own thread only (hook input without ``agent_id``), with a reason
that tells the model to dispatch instead.

Model-facing texts are Chinese like upstream's; the English meaning is in a comment next to each.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from claude_agent_sdk import AgentDefinition, HookMatcher

from flower.catalogue.names import CLARIFY, ORACLE
from flower.catalogue.readback import FILL_IN_MARK
from flower.catalogue.starter import (
    CHANNEL_RULES,
    CLARIFY_RULES,
    COORDINATOR_RULES,
    DELEGATE_REASON,
    EMPTY_MARK,
    GLANCE_RULES,
    ISOLATE_HEADING,
    ISOLATE_RULES,
    JUDGE_CAN_RUN,
    JUDGE_NO_RUN,
    JUDGE_RULES,
    ORACLE_RULES,
    VERDICT_FORMAT,
    WHITELIST_REASON,
    WORKER_RULES,
    WORKTREE_BRANCH_SLOT,
    WORKTREE_PATH_SLOT,
    WORKTREES,
)
from flower.errors import ConfigError, WorkspaceError
from flower.protocols import PersonChannel, WorkbenchLike
from flower.spec import AgentSpec, tool_base
from flower.starter.brief import Brief, render_brief

DEFAULT_WORKER_TOOLS = ["Read", "Write", "Edit", "Bash", "Glob", "Grep", "WebFetch", "WebSearch"]
COORDINATOR_TOOLS = ["Agent", "TodoWrite", "Read"]
READ_TOOLS = ["Read", "Glob", "Grep"]
EDIT_TOOLS = ("Write", "Edit", "NotebookEdit", "MultiEdit")


# -- guards ------------------------------------------------------------------------------------


def _deny(reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def deny_tools(tools: Iterable[str], reason: str, *, main_thread_only: bool = True) -> Any:
    """A PreToolUse hook denying `tools` with `reason` (``{tool}`` is filled in).

    With `main_thread_only`, subagents' calls (hook input carrying ``agent_id``) pass untouched.
    """
    denied = {tool_base(t) for t in tools}

    async def hook(input_data: dict[str, Any], tool_use_id: str | None, context: Any) -> dict[str, Any]:
        if main_thread_only and input_data.get("agent_id"):
            return {}
        name = str(input_data.get("tool_name", ""))
        if tool_base(name) in denied:
            return _deny(reason.format(tool=name))
        return {}

    return hook


def allow_only(
    tools: Iterable[str],
    *,
    reason: str = WHITELIST_REASON,
    reasons: Mapping[str, str] | None = None,
    main_thread_only: bool = True,
) -> Any:
    """A PreToolUse hook denying every tool outside `tools` (``{tool}``, ``{allowed}`` filled in).

    Entries may be patterns like ``Bash(git:*)`` (the base name is what counts) or exact MCP
    names (``mcp__human__ask``); ``mcp__server__*`` allows a whole server. `reasons` gives a
    specific denial text per tool (e.g. the delegate-only one for Write/Edit).
    """
    special = {tool_base(t): text for t, text in (reasons or {}).items()}
    allowed = sorted({tool_base(t) for t in tools})
    prefixes = tuple(t[:-1] for t in allowed if t.endswith("*"))
    exact = {t for t in allowed if not t.endswith("*")}
    shown = ", ".join(allowed)

    async def hook(input_data: dict[str, Any], tool_use_id: str | None, context: Any) -> dict[str, Any]:
        if main_thread_only and input_data.get("agent_id"):
            return {}
        name = str(input_data.get("tool_name", ""))
        if tool_base(name) in exact or (prefixes and name.startswith(prefixes)):
            return {}
        return _deny(special.get(tool_base(name), reason).format(tool=name, allowed=shown))

    return hook


def guard_hooks(*callbacks: Any) -> dict[str, list[HookMatcher]]:
    """``{"PreToolUse": [HookMatcher(hooks=[...])]}`` for AgentSpec.hooks."""
    return {"PreToolUse": [HookMatcher(matcher=None, hooks=list(callbacks))]}


def merge_hooks(*configs: Mapping[str, list[Any]] | None) -> dict[str, list[Any]] | None:
    """Concatenate hook configs event by event (None entries are skipped)."""
    out: dict[str, list[Any]] = {}
    for config in configs:
        for event, matchers in (config or {}).items():
            out.setdefault(event, []).extend(matchers)
    return out or None


# -- git worktrees (isolate=True) -------------------------------------------------------------------


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=False)


def require_git(workspace: str | os.PathLike[str]) -> Path:
    """The repository's top-level directory; ValueError (one line) when `workspace` is not in one."""
    ws = Path(workspace).resolve()
    try:
        got = _git(ws, "rev-parse", "--show-toplevel")
    except (FileNotFoundError, NotADirectoryError):
        got = None
    if got is None or got.returncode != 0:
        raise WorkspaceError(f"isolate=True needs a git repository at {ws}; run git init or drop --isolate")
    return Path(got.stdout.strip()).resolve()


_BAD_NAME = re.compile(r"[\s/\\:?*\[\]~^\x00-\x1f\x7f]|\.\.|^[.-]|\.lock$|@\{|\.$")


def ensure_worktree(repo: str | os.PathLike[str], name: str) -> Path:
    """Create (or reuse) ``<repo>/.flower/worktrees/<name>`` on branch ``flower/<name>``.

    Raises ValueError (one line) outside a git repository, for a name git cannot use as a branch,
    when the repository has no commit yet, or when the directory exists but is not a worktree.
    """
    if not name or _BAD_NAME.search(name):
        raise WorkspaceError(
            f"worker name {name!r} cannot name a git worktree/branch; use letters, digits, '-' or '_'"
        )
    top = require_git(repo)
    path = top / WORKTREES / name
    branch = f"flower/{name}"
    if path.exists():
        listed = _git(top, "worktree", "list", "--porcelain").stdout
        if f"worktree {path}\n" in listed + "\n":
            return path
        raise WorkspaceError(
            f"{path} exists but is not a git worktree of {top}; move it away or pick another worker name"
        )
    if _git(top, "rev-parse", "--verify", "--quiet", "HEAD").returncode != 0:
        raise WorkspaceError(f"isolate=True needs at least one commit in {top}; commit something first")
    has_branch = _git(top, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").returncode == 0
    args = (
        ["worktree", "add", str(path), branch] if has_branch else ["worktree", "add", "-b", branch, str(path)]
    )
    got = _git(top, *args)
    if got.returncode != 0:
        detail = (got.stderr.strip().splitlines() or ["unknown error"])[-1]
        raise WorkspaceError(f"git worktree add {path} failed: {detail}")
    _exclude_worktrees(top)
    return path


def _exclude_worktrees(top: Path) -> None:
    """Keep the worktrees out of the main checkout's `git status` (local exclude, not .gitignore)."""
    got = _git(top, "rev-parse", "--git-path", "info/exclude")
    if got.returncode != 0:
        return
    exclude = Path(got.stdout.strip())
    exclude = exclude if exclude.is_absolute() else top / exclude
    line = f"/{WORKTREES}/"
    try:
        current = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
        if line not in current.splitlines():
            exclude.parent.mkdir(parents=True, exist_ok=True)
            exclude.write_text(
                current + ("" if current.endswith("\n") or not current else "\n") + line + "\n",
                encoding="utf-8",
            )
    except OSError:
        pass


# -- roles ---------------------------------------------------------------------------------------


def worker(
    description: str,
    prompt: str,
    *,
    tools: list[str] | None = None,
    model: str | None = "inherit",
    isolate: bool = False,
    name: str | None = None,
    max_turns: int | None = None,
    effort: Any = None,
) -> AgentDefinition:
    """A subagent for a coordinator's ``workers``. WORKER_RULES are appended to `prompt`.

    `isolate=True` adds the worktree rules; the worktree is ``.flower/worktrees/<name>`` where
    `name` is this argument or, inside coordinator(), the worker's key.
    """
    if not description.strip():
        raise ConfigError("worker(description=...) is empty: say in one line what to dispatch to this worker")
    text = "\n\n".join(
        part for part in (prompt.strip(), WORKER_RULES, ISOLATE_RULES if isolate else "") if part
    )
    defn = AgentDefinition(
        description=description.strip(),
        prompt=text,
        tools=list(tools) if tools is not None else list(DEFAULT_WORKER_TOOLS),
        model=model,
        maxTurns=max_turns,
        effort=effort,
    )
    return _name_worktree(defn, name) if isolate and name else defn


def _name_worktree(defn: AgentDefinition, name: str, root: Path | None = None) -> AgentDefinition:
    path = str(root / WORKTREES / name) if root else f"{WORKTREES}/{name}"
    text = defn.prompt.replace(WORKTREE_PATH_SLOT, path).replace(WORKTREE_BRANCH_SLOT, f"flower/{name}")
    return replace(defn, prompt=text)


def is_isolated(defn: AgentDefinition) -> bool:
    return ISOLATE_HEADING in (defn.prompt or "")


def coordinator(
    name: str,
    instructions: str,
    workers: Mapping[str, AgentDefinition],
    *,
    channel: PersonChannel | None = None,
    glance: bool = False,
    model: str | None = None,
    effort: str | None = None,
    max_turns: int | None = None,
    max_budget_usd: float | None = None,
    permission_mode: str = "acceptEdits",
    workspace: str | os.PathLike[str] | None = None,
    workbench: WorkbenchLike | None = None,
    hooks: Mapping[str, list[Any]] | None = None,
    env: Mapping[str, str] | None = None,
    compact: bool | None = None,
) -> AgentSpec:
    """A delegate-only main agent: Agent, TodoWrite, Read (+ Bash with `glance`), dispatching to `workers`.

    `channel` adds mcp__human__ask / mcp__human__inbox. With `workspace`, isolated workers get
    their worktrees created now (ValueError outside a git repository). With `workbench` (a
    Workbench), each worker's prompt says where the workbench is: a subagent does not see the
    main thread's system prompt, so it would not know where artifacts/ lives.
    """
    if not workers:
        raise ConfigError(f"coordinator {name!r} needs at least one worker to dispatch to")
    own = COORDINATOR_TOOLS + (["Bash"] if glance else []) + (list(channel.tool_names) if channel else [])
    agents = _place_workers(workers, workspace)
    if workbench is not None:
        block = workbench.prompt_block()
        agents = {key: replace(defn, prompt=f"{defn.prompt}\n\n{block}") for key, defn in agents.items()}
    # The session's tool pool must hold the workers' tools, or the subagents cannot use them.
    pool = list(own)
    for defn in agents.values():
        for t in defn.tools if defn.tools is not None else DEFAULT_WORKER_TOOLS:
            if t not in pool:
                pool.append(t)
    rules = [COORDINATOR_RULES] + ([GLANCE_RULES] if glance else []) + ([CHANNEL_RULES] if channel else [])
    # One hook, so the model reads the delegate-only reason for Write/Edit, not a generic one.
    guards = guard_hooks(allow_only(own, reasons={t: DELEGATE_REASON for t in EDIT_TOOLS}))
    return AgentSpec(
        name=name,
        instructions="\n\n".join(p for p in (instructions.strip(), "\n".join(rules)) if p),
        allowed_tools=pool,
        model=model,
        effort=effort,
        max_turns=max_turns,
        max_budget_usd=max_budget_usd,
        permission_mode=permission_mode,
        agents=agents,
        mcp_servers=channel.mcp_servers() if channel else {},
        hooks=merge_hooks(guards, hooks),
        compact=compact,
        env=dict(env or {}),
        glance=glance,
        delegate_only=True,
    )


def _place_workers(
    workers: Mapping[str, AgentDefinition], workspace: str | os.PathLike[str] | None
) -> dict[str, AgentDefinition]:
    for key, defn in workers.items():
        if not isinstance(defn, AgentDefinition):
            raise ConfigError(
                f"worker {key!r} is {type(defn).__name__}, not an AgentDefinition; build it with worker(...)"
            )
    isolated = [key for key, defn in workers.items() if is_isolated(defn)]
    root = require_git(workspace) if isolated and workspace is not None else None
    out: dict[str, AgentDefinition] = {}
    for key, defn in workers.items():
        if key in isolated:
            if root is not None:
                ensure_worktree(root, key)
            defn = _name_worktree(defn, key, root)
        out[key] = defn
    return out


def _with_channel(tools: list[str], channel: PersonChannel | None) -> tuple[list[str], dict[str, Any]]:
    if channel is None:
        return tools, {}
    return tools + list(channel.tool_names), channel.mcp_servers()


def _guarded(
    name: str,
    text: str,
    tools: list[str],
    servers: dict[str, Any],
    model: str | None,
    max_turns: int | None,
    max_budget_usd: float | None,
) -> AgentSpec:
    """A role held to exactly its tools by a PreToolUse guard (the CLI's tool pool is shared)."""
    return AgentSpec(
        name=name,
        instructions=text,
        allowed_tools=tools,
        model=model,
        max_turns=max_turns,
        max_budget_usd=max_budget_usd,
        mcp_servers=servers,
        hooks=guard_hooks(allow_only(tools)),
    )


def clarify(
    channel: PersonChannel | None = None,
    name: str = CLARIFY,
    *,
    model: str | None = None,
    max_turns: int | None = None,
    max_budget_usd: float | None = None,
    instructions: str = "",
) -> AgentSpec:
    """Turns a request into 需求.md's four sections, asking the person through `channel`."""
    tools, servers = _with_channel(list(READ_TOOLS), channel)
    template = render_brief(Brief()).replace(EMPTY_MARK, FILL_IN_MARK)
    text = CLARIFY_RULES + template + ("\n" + instructions.strip() if instructions.strip() else "")
    return _guarded(name, text, tools, servers, model, max_turns, max_budget_usd)


def judge(
    name: str,
    channel: PersonChannel | None = None,
    *,
    can_run: bool = False,
    model: str | None = None,
    max_turns: int | None = None,
    max_budget_usd: float | None = None,
) -> AgentSpec:
    """An independent judge of 目标.md: Read/Glob/Grep (+ Bash with `can_run`), never edits.

    Its reply follows goal.VERDICT_FORMAT, parsed by goal.parse_verdict.
    """
    tools, servers = _with_channel(READ_TOOLS + (["Bash"] if can_run else []), channel)
    text = JUDGE_RULES + (JUDGE_CAN_RUN if can_run else JUDGE_NO_RUN) + "\n" + VERDICT_FORMAT
    return _guarded(name, text, tools, servers, model, max_turns, max_budget_usd)


def oracle(
    name: str = ORACLE,
    max_turns: int = 12,
    max_budget_usd: float = 0.5,
    *,
    model: str | None = None,
) -> AgentSpec:
    """A cheap read-only side-question answerer with a hard turn and budget cap."""
    return AgentSpec(
        name=name,
        instructions=ORACLE_RULES,
        allowed_tools=list(READ_TOOLS),
        model=model,
        max_turns=max_turns,
        max_budget_usd=max_budget_usd,
        hooks=guard_hooks(allow_only(READ_TOOLS)),
    )
