"""ATIF trajectories of real runs (tests/view_fixtures.py: the starter flow with its judge rounds and
subagents; a step that hands over to a successor; a failed and a queued job with no run), checked
with harbor's own validator and against what the job's files say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flower_batch.export.atif import SCHEMA_VERSION, job_atif
from flower_batch.export.trajectory_file import TRAJECTORY_NAME, write_trajectory
from flower_batch.layout import Home
from tests.flower_batch.export.everything import everything_job
from tests.flower_batch.export.harbor_check import validate
from tests.view_fixtures import XSS, real_home

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return real_home(tmp_path_factory.mktemp("atif"))


@pytest.fixture(scope="module")
def written(home: Path, tmp_path_factory) -> dict[str, Path]:
    """Every job of the batch written as <job>/trajectory.json is, into a copy folder."""
    out = tmp_path_factory.mktemp("atif-out")
    return {jd.job: write_trajectory(jd, dest=out / f"{jd.job}.json") for jd in Home(home).jobs("nightly")}


def load(written: dict[str, Path], job: str) -> dict:
    return json.loads(written[job].read_text())


def test_harbors_validator_passes_every_job(written):
    assert validate(list(written.values())) == {str(p): [] for p in written.values()}


def test_harbors_validator_fails_a_broken_one(written, tmp_path):
    """The check above can fail: a step numbered wrong, an observation of no call, an unknown field."""
    numbered, orphan, unknown = (load(written, "hello-base-1") for _ in range(3))
    numbered["steps"][1]["step_id"] = 7
    agent = next(s for s in orphan["steps"] if s.get("observation") and s.get("tool_calls"))
    agent["observation"]["results"][0]["source_call_id"] = "no-such-call"
    unknown["steps"][0]["flower"] = "not an ATIF field"
    paths = []
    for name, t in (("numbered", numbered), ("orphan", orphan), ("unknown", unknown)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(t))
    errors = validate(paths)
    assert any("step_id" in e for e in errors[str(paths[0])])
    assert any("no-such-call" in e for e in errors[str(paths[1])])
    assert any("flower" in e for e in errors[str(paths[2])])


def test_judge_rounds_subagents_tokens_and_cost(home, written):
    t = load(written, "hello-base-1")
    assert t["schema_version"] == SCHEMA_VERSION and t["session_id"] == "nightly/hello-base-1"
    openings = [s["message"] for s in t["steps"] if s["source"] == "system"]
    assert openings == [
        "flower: step 确认需求",
        "flower: step 设定目标",
        "flower: step 干活",
        "flower: judge round 1 of step 干活",
        "flower: step 干活, work round 2 (continues the session of 干活)",
        "flower: judge round 2 of step 干活",
    ]
    judge = [s for s in t["steps"] if s["extra"]["flower"].get("kind") == "judge" and s["source"] == "agent"]
    assert any("not_yet" in s["message"] for s in judge) and any("achieved" in s["message"] for s in judge)
    # Each round's Agent call refers to its own embedded subagent, whose Write is there.
    subs = {s["trajectory_id"]: s for s in t["subagent_trajectories"]}
    refs = [
        r["subagent_trajectory_ref"][0]["trajectory_id"]
        for s in t["steps"]
        for r in (s.get("observation") or {}).get("results", [])
        if r.get("subagent_trajectory_ref")
    ]
    assert len(refs) == 2 and set(refs) == set(subs)
    for sub in subs.values():
        assert sub["agent"]["name"] == "coder"
        write = next(c for s in sub["steps"] for c in s.get("tool_calls") or [])
        assert write["function_name"] == "Write" and "hello.txt" in write["arguments"]["file_path"]
    # One agent step per model call, with its tokens: main-thread calls = the turns the CLI reported.
    rows = json.loads((home / "nightly" / "hello-base-1" / "runs" / "manifest.json").read_text())
    calls = [s for s in t["steps"] if s["source"] == "agent"]
    assert len(calls) == sum(r["num_turns"] for r in rows)
    assert all(s["metrics"]["prompt_tokens"] > 0 and s["llm_call_count"] == 1 for s in calls)
    every = calls + [s for sub in subs.values() for s in sub["steps"] if s["source"] == "agent"]
    fm = t["final_metrics"]
    assert fm["total_prompt_tokens"] == sum(s["metrics"]["prompt_tokens"] for s in every)
    assert fm["total_completion_tokens"] == sum(s["metrics"]["completion_tokens"] for s in every)
    assert fm["total_steps"] == len(t["steps"])
    # The cost is the record's (the gateway's meter); the verdict rides along.
    assert fm["total_cost_usd"] == 0.2178 and fm["extra"]["status"] == "passed" and fm["extra"]["passed"]


def test_tool_results_are_the_observations_of_their_calls(written):
    t = load(written, "hello-base-1")
    ask = next(
        s
        for s in t["steps"]
        if any(c["function_name"] == "mcp__human__ask" for c in s.get("tool_calls") or [])
    )
    (call,) = ask["tool_calls"]
    assert "hello.txt" in call["arguments"]["question"]
    (result,) = ask["observation"]["results"]
    assert result["source_call_id"] == call["tool_call_id"] and result["content"]


def test_handoff_is_a_system_step_with_the_document(written):
    t = load(written, "build-handoff-1")
    roles = [s["extra"]["flower"].get("session_role") for s in t["steps"]]
    handoff = next(s for s in t["steps"] if "handoff" in s["extra"]["flower"])
    i = t["steps"].index(handoff)
    assert set(roles[1:i]) == {"retired"} and roles[i + 1] == "current"
    assert handoff["extra"]["flower"]["handoff"]["from"] != handoff["extra"]["flower"]["handoff"]["to"]
    (doc,) = handoff["observation"]["results"]
    assert "FINAL-BANANA" in doc["content"] and doc["extra"]["document"] == ".flower/notes/交接-干活.md"
    assert t["steps"][i + 1]["message"].startswith("你在接手一个进行中的任务")
    assert any(XSS in s["message"] for s in t["steps"])  # data kept verbatim: a viewer escapes it


def test_a_job_that_never_ran_still_has_a_trajectory_with_its_verdict(written):
    t = load(written, "hello-fast-1")
    (step,) = t["steps"]
    assert step["source"] == "system" and "check exited 1" in step["message"]
    assert t["final_metrics"]["extra"]["status"] == "failed"


def test_default_place_is_beside_the_record(home, tmp_path):
    jd = Home(home).job("nightly", "hello-base-1")
    path = write_trajectory(jd)
    try:
        assert path == jd.root / TRAJECTORY_NAME and json.loads(path.read_text()) == job_atif(jd)
    finally:
        path.unlink()


@pytest.fixture(scope="module")
def everything(tmp_path_factory) -> Path:
    """One job with subagents, judge rounds and a handoff in each judge round (everything.py)."""
    base = tmp_path_factory.mktemp("everything")
    root = everything_job(base / "home", base)
    return write_trajectory(Home(base / "home").job("nightly", root.name), dest=base / "trajectory.json")


def test_one_job_with_a_subagent_a_judge_round_and_a_handoff(everything):
    assert validate([everything]) == {str(everything): []}
    t = json.loads(everything.read_text())
    flower = [s["extra"]["flower"] for s in t["steps"]]
    handoffs = [f for f in flower if "handoff" in f]
    assert [f["step"] for f in handoffs] == ["干活·判定#1", "干活·判定#2"]
    assert len(t["subagent_trajectories"]) == 2
    # Each judge round: the retired judge session, the document, the successor's verdict.
    for round_, verdict in ((1, "not_yet"), (2, "achieved")):
        steps = [s for s in t["steps"] if s["extra"]["flower"].get("step") == f"干活·判定#{round_}"]
        kinds = [
            s["extra"]["flower"].get("session_role")
            or ("handoff" if "handoff" in s["extra"]["flower"] else "open")
            for s in steps
        ]
        assert kinds[0] == "open" and "handoff" in kinds
        cut = kinds.index("handoff")
        assert set(kinds[1:cut]) == {"retired"} and set(kinds[cut + 1 :]) == {"current"}
        doc = steps[cut]["observation"]["results"][0]["content"]
        assert "## 现在在做什么" in doc  # the document this round handed over
        assert verdict in steps[-1]["message"]
