"""Roles and guards: specs, hooks, git worktrees — and a real coordinator dispatching a real worker."""

from __future__ import annotations

import subprocess

import pytest
from claude_agent_sdk import AgentDefinition

from flower.catalogue.starter import VERDICT_FORMAT, WORKER_RULES
from flower.starter.channel import HumanChannel
from flower.starter.roles import (
    DEFAULT_WORKER_TOOLS,
    allow_only,
    clarify,
    coordinator,
    deny_tools,
    ensure_worktree,
    guard_hooks,
    judge,
    merge_hooks,
    oracle,
    require_git,
    worker,
)
from tests.rig import message_requests, runtime, scripted, texts_of


def channel(tmp_path) -> HumanChannel:
    return HumanChannel(log_path=tmp_path / "qa.md", timeout_s=0)


def decision(out: dict) -> tuple[str, str] | None:
    spec = out.get("hookSpecificOutput")
    return (spec["permissionDecision"], spec["permissionDecisionReason"]) if spec else None


async def call(hook, tool: str, **extra) -> tuple[str, str] | None:
    return decision(
        await hook(
            {"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": {}, **extra}, "t1", None
        )
    )


# -- worker --------------------------------------------------------------------------------------


def test_worker_defaults_and_rules():
    w = worker("写代码与测试", "你负责实现。")
    assert isinstance(w, AgentDefinition)
    assert w.tools == DEFAULT_WORKER_TOOLS
    assert w.tools == ["Read", "Write", "Edit", "Bash", "Glob", "Grep", "WebFetch", "WebSearch"]
    assert w.model == "inherit"
    assert w.prompt.startswith("你负责实现。") and w.prompt.endswith(WORKER_RULES)
    for part in ("30 行", "结论", "证据", "产出", "未验证", "2000", "自足"):
        assert part in w.prompt
    assert "隔离工作区" not in w.prompt


def test_worker_custom_tools_are_copied_and_description_required():
    tools = ["Read", "Bash"]
    w = worker("d", "p", tools=tools, model="haiku", max_turns=5)
    tools.append("Write")
    assert w.tools == ["Read", "Bash"] and w.model == "haiku" and w.maxTurns == 5
    with pytest.raises(ValueError, match="description"):
        worker("  ", "p")


def test_isolated_worker_names_its_worktree():
    w = worker("d", "p", isolate=True, name="coder")
    assert ".flower/worktrees/coder" in w.prompt and "flower/coder" in w.prompt and "⟦" not in w.prompt
    unnamed = worker("d", "p", isolate=True)
    assert "⟦path⟧" in unnamed.prompt  # coordinator() fills in the worker's key


# -- coordinator -------------------------------------------------------------------------------------


def test_coordinator_tools_pool_and_guard(tmp_path):
    ch = channel(tmp_path)
    spec = coordinator(
        "协调者",
        "做好它",
        {"coder": worker("写代码", "实现"), "reader": worker("读", "读", tools=["Read", "Grep"])},
        channel=ch,
    )
    assert spec.allowed_tools[:5] == ["Agent", "TodoWrite", "Read", "mcp__human__ask", "mcp__human__inbox"]
    assert {"Write", "Edit", "Bash"} <= set(spec.allowed_tools)  # the workers' tools are in the session pool
    assert spec.permission_mode == "acceptEdits" and spec.delegate_only and not spec.glance
    assert list(spec.mcp_servers) == ["human"]
    assert set(spec.agents) == {"coder", "reader"}
    assert spec.instructions.startswith("做好它") and "mcp__human__ask" in spec.instructions
    assert "Bash 只用来" not in spec.instructions
    assert list(spec.hooks) == ["PreToolUse"]


@pytest.mark.anyio
async def test_coordinator_guard_denies_edits_on_its_own_thread_only(tmp_path):
    spec = coordinator("c", "", {"coder": worker("d", "p")})
    hook = spec.hooks["PreToolUse"][0].hooks[0]
    for tool in ("Write", "Edit", "NotebookEdit"):
        verdict = await call(hook, tool)
        assert verdict is not None and verdict[0] == "deny"
        assert "协调者不亲自改文件" in verdict[1] and tool in verdict[1] and "Agent" in verdict[1]
    assert (await call(hook, "Bash"))[1].startswith("这个角色不能用 Bash")  # no glance: no Bash
    for tool in ("Agent", "Task", "TodoWrite", "Read"):
        assert await call(hook, tool) is None
    assert await call(hook, "Write", agent_id="a1", agent_type="coder") is None  # a worker's call


@pytest.mark.anyio
async def test_coordinator_glance_gets_bash():
    spec = coordinator("c", "", {"w": worker("d", "p")}, glance=True, model="sonnet", max_turns=9)
    assert spec.glance and "Bash" in spec.allowed_tools[:4] and "Bash 只用来" in spec.instructions
    assert spec.model == "sonnet" and spec.max_turns == 9
    assert await call(spec.hooks["PreToolUse"][0].hooks[0], "Bash") is None


def test_coordinator_rejects_bad_workers():
    with pytest.raises(ValueError, match="at least one worker"):
        coordinator("c", "", {})
    with pytest.raises(ValueError, match="not an AgentDefinition"):
        coordinator("c", "", {"w": "write code"})  # type: ignore[dict-item]


def test_coordinator_keeps_user_hooks():
    async def mine(i, t, c):
        return {}

    from claude_agent_sdk import HookMatcher

    spec = coordinator("c", "", {"w": worker("d", "p")}, hooks={"PostToolUse": [HookMatcher(hooks=[mine])]})
    assert set(spec.hooks) == {"PreToolUse", "PostToolUse"}


# -- guards -----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_allow_only_patterns_mcp_and_wildcards():
    hook = allow_only(["Read", "Bash(git:*)", "mcp__human__ask", "mcp__docs__*"])
    assert await call(hook, "Bash") is None
    assert await call(hook, "mcp__human__ask") is None
    assert await call(hook, "mcp__docs__search") is None
    denied = await call(hook, "mcp__human__inbox")
    assert denied[0] == "deny" and "mcp__human__inbox" in denied[1] and "Read" in denied[1]
    assert (await call(hook, "Write", agent_id="sub")) is None
    strict = allow_only(["Read"], main_thread_only=False)
    assert (await call(strict, "Write", agent_id="sub"))[0] == "deny"


@pytest.mark.anyio
async def test_deny_tools_and_hook_plumbing():
    hook = deny_tools(["Bash"], "no shell here: {tool}")
    assert await call(hook, "Bash") == ("deny", "no shell here: Bash")
    assert await call(hook, "Read") is None
    assert await call(hook, "Bash", agent_id="x") is None
    config = guard_hooks(hook)
    assert config["PreToolUse"][0].matcher is None and config["PreToolUse"][0].hooks == [hook]
    merged = merge_hooks(config, None, guard_hooks(hook))
    assert len(merged["PreToolUse"]) == 2
    assert merge_hooks(None, {}) is None


# -- clarify, judge, oracle -----------------------------------------------------------------------


def test_clarify_spec(tmp_path):
    spec = clarify(channel(tmp_path))
    assert spec.name == "确认需求"
    assert spec.allowed_tools == ["Read", "Glob", "Grep", "mcp__human__ask", "mcp__human__inbox"]
    for part in ("# 需求确认书", "## 目标", "## 验收标准", "## 边界", "## 未知与假设", "mcp__human__ask"):
        assert part in spec.instructions
    assert clarify(name="澄清").allowed_tools == ["Read", "Glob", "Grep"] and clarify().mcp_servers == {}


def test_judge_spec(tmp_path):
    plain = judge("干活·判定", channel(tmp_path))
    assert plain.allowed_tools == ["Read", "Glob", "Grep", "mcp__human__ask", "mcp__human__inbox"]
    assert VERDICT_FORMAT in plain.instructions and "不能运行命令" in plain.instructions
    runner = judge("j", can_run=True)
    assert runner.allowed_tools == ["Read", "Glob", "Grep", "Bash"] and "可以用 Bash" in runner.instructions
    assert runner.mcp_servers == {}


@pytest.mark.anyio
async def test_judge_and_oracle_are_read_only():
    for spec in (judge("j"), judge("j", can_run=True), oracle()):
        hook = spec.hooks["PreToolUse"][0].hooks[0]
        assert (await call(hook, "Write"))[0] == "deny"
        assert (await call(hook, "Edit"))[0] == "deny"
        assert await call(hook, "Read") is None
    o = oracle()
    assert (o.name, o.max_turns, o.max_budget_usd, o.allowed_tools) == (
        "旁路问答",
        12,
        0.5,
        ["Read", "Glob", "Grep"],
    )


# -- git worktrees ---------------------------------------------------------------------------------


def git(cwd, *args):
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "t")
    (path / "README.md").write_text("hi\n")
    git(path, "add", "README.md")
    git(path, "commit", "-qm", "init")
    return path


def test_require_git_message_outside_a_repo(tmp_path):
    ws = tmp_path / "plain"
    ws.mkdir()
    with pytest.raises(ValueError) as err:
        require_git(ws)
    assert (
        str(err.value)
        == f"isolate=True needs a git repository at {ws.resolve()}; run git init or drop --isolate"
    )
    with pytest.raises(ValueError, match="needs a git repository"):
        require_git(tmp_path / "missing")


def test_ensure_worktree_creates_reuses_and_hides(repo):
    path = ensure_worktree(repo, "coder")
    assert path == repo.resolve() / ".flower" / "worktrees" / "coder"
    assert (path / "README.md").read_text() == "hi\n"
    assert git(path, "rev-parse", "--abbrev-ref", "HEAD").strip() == "flower/coder"
    assert ensure_worktree(repo, "coder") == path  # idempotent
    assert git(repo, "status", "--porcelain") == ""  # worktrees stay out of the main checkout
    assert ensure_worktree(repo / ".flower", "写代码").name == "写代码"  # from a subdirectory, unicode name


def test_ensure_worktree_reuses_an_existing_branch(repo):
    git(repo, "branch", "flower/tester")
    path = ensure_worktree(repo, "tester")
    assert git(path, "rev-parse", "--abbrev-ref", "HEAD").strip() == "flower/tester"


def test_ensure_worktree_refusals(repo, tmp_path):
    for bad in ("", "a b", "../x", "x/y", ".hidden", "-f", "x.lock"):
        with pytest.raises(ValueError, match="cannot name"):
            ensure_worktree(repo, bad)
    (repo / ".flower" / "worktrees" / "squat").mkdir(parents=True)
    with pytest.raises(ValueError, match="is not a git worktree"):
        ensure_worktree(repo, "squat")
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(ValueError, match="at least one commit"):
        ensure_worktree(empty, "coder")


def test_coordinator_with_workspace_prepares_isolated_workers(repo, tmp_path):
    spec = coordinator(
        "c", "", {"coder": worker("d", "p", isolate=True), "plain": worker("d", "p")}, workspace=repo
    )
    wt = repo.resolve() / ".flower" / "worktrees" / "coder"
    assert wt.is_dir()
    assert str(wt) in spec.agents["coder"].prompt and "⟦" not in spec.agents["coder"].prompt
    assert not (repo / ".flower" / "worktrees" / "plain").exists()
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ValueError, match="run git init or drop --isolate"):
        coordinator("c", "", {"coder": worker("d", "p", isolate=True)}, workspace=plain)
    # without a workspace, the worker is told where its worktree goes and how to make it
    relative = coordinator("c", "", {"coder": worker("d", "p", isolate=True)})
    assert "git worktree add -b flower/coder .flower/worktrees/coder" in relative.agents["coder"].prompt


# -- the real CLI -----------------------------------------------------------------------------------

DISPATCH_SCENARIO = {
    "rules": [
        # The subagent's own requests: its system prompt carries the worker's prompt text.
        {
            "name": "worker-write",
            "when": {"system_contains": "WORKER-MARKER", "last_is_tool_result": False},
            "reply": [
                {"tool_use": {"name": "Write", "input": {"file_path": "{cwd}/hello.txt", "content": "hi\n"}}}
            ],
        },
        {
            "name": "worker-done",
            "when": {"system_contains": "WORKER-MARKER", "last_is_tool_result": True},
            "reply": [{"text": "结论: hello.txt written\n证据: Write ok\n产出: hello.txt\n未验证: 无"}],
        },
        # The coordinator: first tries to write itself, then dispatches after the denial.
        {
            "name": "coord-write",
            "when": {"last_user_contains": "make hello", "last_is_tool_result": False},
            "reply": [
                {"tool_use": {"name": "Write", "input": {"file_path": "{cwd}/direct.txt", "content": "x"}}}
            ],
        },
        {
            "name": "coord-dispatch",
            "when": {"tool_result_contains": "协调者不亲自改文件"},
            "reply": [
                {
                    "tool_use": {
                        "name": "Agent",
                        "input": {
                            "description": "write hello",
                            "prompt": "Write hello.txt containing hi.",
                            "subagent_type": "coder",
                        },
                    }
                }
            ],
        },
        {"name": "coord-final", "reply": [{"text": "COORDINATOR-DONE"}]},
    ]
}


@pytest.mark.anyio
async def test_real_cli_coordinator_write_denied_worker_writes(tmp_path):
    spec = coordinator(
        "协调者", "", {"coder": worker("写文件", "WORKER-MARKER 你负责实现。")}, channel=channel(tmp_path)
    )
    with scripted(tmp_path, DISPATCH_SCENARIO) as srv:
        rt = runtime(tmp_path, srv)
        try:
            result = await rt.run(spec, "make hello")
        finally:
            rt.close()
        reqs = message_requests(srv)
    assert result.ok, result.error
    ws = rt.workspace
    assert not (ws / "direct.txt").exists()  # the guard stopped the coordinator's own Write
    assert (ws / "hello.txt").read_text() == "hi\n"  # the worker's Write went through
    rules = [r["rule"] for r in reqs]
    assert rules[:2] == ["coord-write", "coord-dispatch"]
    assert "worker-write" in rules and "worker-done" in rules
    denial = texts_of(reqs[1])
    assert "协调者不亲自改文件" in denial and "Write" in denial
    worker_req = next(r for r in reqs if r["rule"] == "worker-write")
    assert WORKER_RULES.splitlines()[1] in str(
        worker_req["body"]["system"]
    )  # WORKER_RULES reached the subagent
    assert [c["name"] for c in result.tool_calls] == ["Write", "Agent"]
    assert result.text == "COORDINATOR-DONE"


def test_coordinator_tells_workers_where_the_workbench_is(tmp_path):
    from flower.context.workbench import Workbench

    wb = Workbench(tmp_path)
    spec = coordinator("c", "", {"coder": worker("d", "p")}, workbench=wb)
    assert spec.agents["coder"].prompt.endswith(wb.prompt_block())
    assert ".flower/artifacts/" in spec.agents["coder"].prompt
