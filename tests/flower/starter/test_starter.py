"""flower.starter.flow: clarify_step, goal_step, with_goal, starter_flow — pure wiring first, then the
real SDK + the real bundled CLI against the scripted model (examples/scenarios/starter.toml)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from flower import CLARIFY_RESUME, AgentSpec, HumanChannel, Step, Workflow, starter_flow
from flower.catalogue.starter import WAKE_PROMPT, WORK_RESUME, WORKER_RULES
from flower.runtime.engine import Runtime
from flower.scripted import Scenario, ScriptedServer
from flower.starter.brief import read_brief
from flower.starter.flow import clarify_step, goal_step, with_goal
from tests.rig import message_requests, runtime, scripted, texts_of

STARTER = Path(__file__).resolve().parents[3] / "examples" / "scenarios" / "starter.toml"

BRIEF = """# 需求确认书

## 目标

让 hello.txt 说 hi。

## 验收标准

- hello.txt 的内容是 hi

## 边界

只动 hello.txt。

## 未知与假设

无
"""
GOAL = "# 目标\n\nhello.txt 说 hi。\n\n# 判定清单\n\n- hello.txt 存在,内容是 hi\n"


def settled(ws: Path) -> Path:
    """A workspace whose brief and goal are already frozen; returns the notes directory."""
    notes = ws / ".flower" / "notes"
    notes.mkdir(parents=True)
    (notes / "需求.md").write_text(BRIEF, encoding="utf-8")
    (notes / "目标.md").write_text(GOAL, encoding="utf-8")
    return notes


def names(wf: Workflow) -> list[str]:
    return [s.name for s in wf.steps]


# -- wiring (no model) ----------------------------------------------------------------------------


def test_starter_flow_shapes(tmp_path):
    wf = starter_flow("make hello.txt say hi", workspace=tmp_path, run_dir=tmp_path / "runs", rounds=4)
    assert names(wf) == ["确认需求", "设定目标", "干活"]
    clarify, goal, work = wf.steps
    assert clarify.resume_prompt == CLARIFY_RESUME and "make hello.txt say hi" in clarify.prompt
    assert goal.resume_prompt is None  # re-deriving needs the whole brief again
    assert work.retries == 3 and work.gate is not None and work.on_reject is not None
    assert work.resume_prompt == WORK_RESUME
    assert wf.workbench.root == tmp_path / ".flower" and wf.workbench.notes.is_dir()
    assert wf.channel.amend_path == wf.workbench.notes / "需求.md"
    assert wf.channel.log_path == wf.workbench.notes / "问答记录.md"
    no_goal = starter_flow("x", workspace=tmp_path, run_dir=tmp_path / "runs", goal=False)
    assert names(no_goal) == ["确认需求", "干活"] and no_goal.steps[1].gate is None
    only = starter_flow("x", workspace=tmp_path, run_dir=tmp_path / "runs", clarify_only=True)
    assert names(only) == ["确认需求"]


def test_starter_flow_refusals_are_one_line(tmp_path):
    cases = [
        (dict(ask="x", isolate=True), "git repository"),
        (dict(ask=""), "nothing to do"),
        (dict(ask="x", rounds=0), "rounds must be >= 1"),
    ]
    for kwargs, text in cases:
        with pytest.raises(ValueError, match=text) as info:
            starter_flow(workspace=tmp_path, run_dir=tmp_path / "runs", **kwargs)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="not a directory"):
        starter_flow("x", workspace=tmp_path / "missing")


def test_isolate_in_a_git_repository_prepares_the_worker_worktree(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path),
            "-c",
            "user.email=a@b",
            "-c",
            "user.name=a",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
        check=True,
    )
    wf = starter_flow("x", workspace=tmp_path, run_dir=tmp_path / "runs", isolate=True)
    coder = wf.steps[-1].spec.agents["coder"]
    assert "## 隔离工作区" in coder.prompt and (tmp_path / ".flower" / "worktrees" / "coder").is_dir()


def test_frozen_steps_are_skipped_and_still_feed_ctx(tmp_path):
    notes = settled(tmp_path)
    events: list[tuple[str, dict]] = []
    ctx: dict = {"_on_event": lambda kind, payload: events.append((kind, payload))}
    clarify = clarify_step(None, brief_path=notes / "需求.md", prompt="x")
    goal = goal_step(None, goal_path=notes / "目标.md")
    assert clarify.when(ctx) is False and goal.when(ctx) is False
    assert ctx["_brief"].complete and "## 边界" in ctx["确认需求"] and "只动 hello.txt" in ctx["确认需求"]
    assert ctx["_goal"].checks == ["hello.txt 存在,内容是 hi"] and "# 判定清单" in ctx["设定目标"]
    assert [k for k, _ in events] == ["frozen", "frozen"]
    assert goal_step(None, goal_path=notes / "目标.md", always_set=True).when({}) is True
    (notes / "需求.md").write_text(BRIEF.replace("只动 hello.txt。", "(未填)"), encoding="utf-8")
    assert clarify.when({}) is True  # a brief missing a section is not frozen


def test_wake_words_land_in_the_brief_rederive_the_goal_and_become_the_resume_prompt(tmp_path):
    notes = settled(tmp_path)
    wf = starter_flow("also add bye.txt", workspace=tmp_path, run_dir=tmp_path / "runs")
    brief = read_brief(notes / "需求.md")
    assert brief.complete and "also add bye.txt" in brief.appendix["唤醒时追加"]
    clarify, goal, work = wf.steps
    assert clarify.when({}) is False  # the brief stays frozen ...
    assert goal.when({}) is True  # ... but 目标.md is derived again
    assert work.resume_prompt == WAKE_PROMPT.format(words="also add bye.txt")


def test_silent_wake_touches_nothing(tmp_path):
    notes = settled(tmp_path)
    before = (notes / "需求.md").read_bytes(), (notes / "目标.md").read_bytes()
    wf = starter_flow("", workspace=tmp_path, run_dir=tmp_path / "runs")
    assert ((notes / "需求.md").read_bytes(), (notes / "目标.md").read_bytes()) == before
    assert [s.when({}) for s in wf.steps[:2]] == [False, False]
    assert wf.steps[2].resume_prompt == WORK_RESUME


def test_new_archives_the_three_files_together(tmp_path):
    notes = settled(tmp_path)
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "lineage.json").write_text(json.dumps({"workspace": str(tmp_path), "woke": 3, "steps": {}}))
    wf = starter_flow("another thing", workspace=tmp_path, run_dir=runs, new=True)
    (archived,) = (notes / "archive").iterdir()
    assert sorted(p.name for p in archived.iterdir()) == ["lineage.json", "目标.md", "需求.md"]
    assert not (runs / "lineage.json").exists() and not (notes / "需求.md").exists()
    assert "another thing" in wf.steps[0].prompt  # a new task, not wake words


def test_with_goal_rounds_and_user_gate(tmp_path):
    spec = AgentSpec("w")
    step = with_goal(
        Step("w", spec, "p", gate=lambda r, ctx: True), None, goal_path=tmp_path / "g.md", rounds=5
    )
    assert step.retries == 4 and step.name == "w"
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        with_goal(Step("w", spec, "p"), None, goal_path=tmp_path / "g.md", rounds=0)


# -- the real CLI ---------------------------------------------------------------------------------


def starter_runtime(tmp_path: Path, srv: ScriptedServer, wf: Workflow) -> Runtime:
    return Runtime(
        workspace=tmp_path / "ws",
        run_dir=tmp_path / "runs",
        env=srv.env(tmp_path / "cfg"),
        workbench=wf.workbench,
        resilience=False,
    )


@pytest.mark.anyio
@pytest.mark.slow
async def test_starter_flow_end_to_end(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    events: list[tuple[str, dict]] = []
    with ScriptedServer(Scenario.load(STARTER), log_path=tmp_path / "model.jsonl", keep_requests=True) as srv:
        wf = starter_flow("make hello.txt say hi", workspace=ws, run_dir=tmp_path / "runs", timeout_s=0)
        rt = starter_runtime(tmp_path, srv, wf)
        try:
            ctx = await wf.run(rt, on_event=lambda kind, payload: events.append((kind, payload)))
        finally:
            rt.close()
        reqs = message_requests(srv)
        assert not srv.unmatched
    assert not ctx.get("_failed_at"), ctx.get("_results")
    assert (ws / "hello.txt").read_text() == "hi\n"
    rows = json.loads(rt.manifest_path.read_text())
    assert [r["step"] for r in rows] == [
        "确认需求",
        "设定目标",
        "干活",
        "干活·判定#1",
        "干活#round2",
        "干活·判定#2",
    ]
    sid = {r["step"]: r["session_id"] for r in rows}
    assert sid["干活"] == sid["干活#round2"]  # not_yet resumed the work session
    judges = {sid["干活·判定#1"], sid["干活·判定#2"]}
    assert len(judges) == 2 and not judges & {sid["确认需求"], sid["设定目标"], sid["干活"]}
    lineage = json.loads((tmp_path / "runs" / "lineage.json").read_text())
    assert lineage["steps"] == {"确认需求": sid["确认需求"], "设定目标": sid["设定目标"], "干活": sid["干活"]}
    # Each judge is a fresh session: its first request is its session's first, with no history.
    for judge_sid in judges:
        first = next(r for r in reqs if r["session"] == judge_sid)
        assert first["nth"] == 1 and "照这份需求做" not in texts_of(first)
    # The file was written by the worker subagent, not by the coordinator.
    write_req = next(r for r in reqs if r["rule"] == "coder: write hello (first try)")
    assert WORKER_RULES.splitlines()[1] in json.dumps(write_req["body"]["system"], ensure_ascii=False)
    assert {c["name"] for c in ctx["_results"]["干活"].tool_calls} == {"Agent"}
    # Round 2 carried the verdict's feedback into the same session.
    fix = next(r for r in reqs if r["rule"] == "work: dispatch the fix (judge said not_yet)")
    assert fix["session"] == sid["干活"] and "实际内容是 hello" in texts_of(fix)
    # The brief records the unanswered question's assumption; the Q&A log has the exchange.
    notes = tmp_path / "ws" / ".flower" / "notes"
    brief = read_brief(notes / "需求.md")
    assert brief.complete and "假设只写 hi" in brief["未知与假设"]
    qa = (notes / "问答记录.md").read_text()
    assert "hello.txt 里只写 hi" in qa and "全自动模式" in qa
    assert "判定清单" in (notes / "目标.md").read_text()
    assert ctx["_verdict"].achieved and ctx["确认需求"] == brief.prompt_block()
    kinds = [k for k, _ in events]
    assert kinds.count("verdict") == 2 and "goal" in kinds and "warn" in kinds  # unverifiable check warned


JUDGE_RULES = [
    {"name": "work", "when": {"system_contains": "ROLE=work"}, "reply": "worked"},
    {
        "name": "judge ambiguous once",
        "times": 1,
        "when": {"system_contains": "## 独立判定", "last_user_contains": "MODE=ambiguous"},
        "reply": "I think it is probably fine, mostly.",
    },
    {
        "name": "judge unreachable",
        "when": {"system_contains": "## 独立判定", "last_user_contains": "MODE=unreachable"},
        "reply": "## 结论\nunreachable\n\n## 理由\nNEEDS-A-GPU: 这台机器没有 GPU。\n\n## 未通过\n- 训练完成",
    },
    {
        "name": "judge achieved",
        "when": {"system_contains": "## 独立判定"},
        "reply": "## 结论\nachieved\n\n## 理由\n都对。\n\n## 未通过\n无",
    },
]


def judged_flow(tmp_path: Path, mode: str, answer: str | None) -> tuple[Workflow, HumanChannel]:
    goal = tmp_path / "目标.md"
    goal.write_text(f"# 目标\n\nMODE={mode}\n\n# 判定清单\n\n- 训练完成\n", encoding="utf-8")
    ch = HumanChannel(log_path=tmp_path / "qa.md", timeout_s=5, ask_fn=lambda q, t: answer)
    step = with_goal(
        Step("w", AgentSpec("w", instructions="ROLE=work"), "work please"), ch, goal_path=goal, rounds=3
    )
    return Workflow([step], channel=ch), ch


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("mode", "answer", "steps", "failed"),
    [
        ("unreachable", None, ["w", "w·判定#1"], True),  # nobody answers: StepAbort, rounds unused
        ("unreachable", "1", ["w", "w·判定#1"], False),  # the person accepts the state as done
        ("unreachable", "3", ["w", "w·判定#1", "w#round2", "w·判定#2", "w#round3", "w·判定#3"], True),
        ("ambiguous", None, ["w", "w·判定#1", "w#round2", "w·判定#2"], False),  # unclear = not achieved
    ],
)
async def test_verdict_paths(tmp_path, mode, answer, steps, failed):
    with scripted(tmp_path, {"rules": JUDGE_RULES}) as srv:
        wf, ch = judged_flow(tmp_path, mode, answer)
        rt = runtime(tmp_path, srv)
        try:
            ctx = await wf.run(rt)
        finally:
            rt.close()
        reqs = message_requests(srv)
    assert [r.step for r in rt.results] == steps
    assert bool(ctx.get("_failed_at")) is failed
    if mode == "unreachable" and answer is None:
        assert "NEEDS-A-GPU" in ctx["_aborted"] and ctx["_failed_at"] == "w"
    if answer == "3":  # the work session heard that the person overruled the judge
        assert "用户认为判定者错了" in texts_of(reqs[[r["rule"] for r in reqs].index("work", 1)])
    if mode == "ambiguous":
        assert ctx["_verdict"].achieved and "没有给出可用的结论" in texts_of(reqs[2])
    if mode == "unreachable":
        assert "无法达成" in (tmp_path / "qa.md").read_text()


CLARIFY_RULES = [
    {
        "name": "resume: complete",
        "when": {
            "system_contains": "## 确认需求",
            "last_user_contains": "需求确认还没有做完",
            "any_text_contains": "REQ-X",
        },
        "reply": BRIEF,
    },
    {
        "name": "repair: still no assumptions",
        "when": {"system_contains": "## 确认需求", "last_user_contains": "需求确认书还缺这几节"},
        "reply": BRIEF.replace("无\n", ""),
    },
    {
        "name": "first: two sections only",
        "when": {"system_contains": "## 确认需求", "last_user_contains": "REQ-X"},
        "reply": "# 需求确认书\n\n## 目标\n\n让 hello.txt 说 hi。\n\n## 验收标准\n\n- 内容是 hi\n",
    },
]


@pytest.mark.anyio
async def test_clarify_repairs_then_continues_its_session_next_process(tmp_path):
    brief_file = tmp_path / "notes" / "需求.md"

    def flow() -> Workflow:
        return Workflow([clarify_step(None, brief_path=brief_file, prompt="REQ-X make hello.txt say hi")])

    with scripted(tmp_path, {"rules": CLARIFY_RULES}) as srv:
        rt = runtime(tmp_path, srv)
        try:
            first = await flow().run(rt)
            # Still incomplete after the repair round: accepted as it is, written, not frozen.
            assert [r.step for r in rt.results] == ["确认需求", "确认需求#round2"]
            assert "边界、未知与假设" in texts_of(message_requests(srv)[1])
            partial = read_brief(brief_file)
            assert not first.get("_failed_at") and partial["边界"] and not partial.complete
            # The next process continues the same session with CLARIFY_RESUME, not the request.
            second = await flow().run(rt)
            resumed = message_requests(srv)[-1]
            assert (
                resumed["rule"] == "resume: complete" and resumed["session"] == first["_sessions"]["确认需求"]
            )
            assert read_brief(brief_file).complete and second["_brief"].complete
            count = len(message_requests(srv))
            third = await flow().run(rt)  # frozen: skipped, no model call, ctx still fed
            assert len(message_requests(srv)) == count and "## 未知与假设" in third["确认需求"]
        finally:
            rt.close()
        assert not srv.unmatched


@pytest.mark.anyio
@pytest.mark.parametrize("can_run", [False, True])
async def test_judge_gets_bash_only_with_can_run(tmp_path, can_run):
    goal = tmp_path / "目标.md"
    goal.write_text("# 目标\n\nMODE=plain\n\n# 判定清单\n\n- 训练完成\n", encoding="utf-8")
    step = with_goal(
        Step("w", AgentSpec("w", instructions="ROLE=work"), "work please"),
        None,
        goal_path=goal,
        can_run=can_run,
    )
    with scripted(tmp_path, {"rules": JUDGE_RULES}) as srv:
        rt = runtime(tmp_path, srv)
        try:
            ctx = await Workflow([step]).run(rt)
        finally:
            rt.close()
        judge_req = next(r for r in message_requests(srv) if r["rule"] == "judge achieved")
    assert ctx["_verdict"].achieved
    tools = {t["name"] for t in judge_req["body"].get("tools", [])}
    assert {"Read", "Glob", "Grep"} <= tools and ("Bash" in tools) is can_run
    assert not tools & {"Write", "Edit"}
