"""`flower run --window` / `$FLOWER_WINDOW`: the handoff threshold of a workflow run (how a job in
a flower-batch container gets a small window: `--env FLOWER_WINDOW=…`). Real CLI, scripted model."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.rig import message_requests, scripted

FLOW = """
from flower import AgentSpec, Step, Workflow

def main():
    spec = AgentSpec("w", allowed_tools=["Bash"], permission_mode="bypassPermissions", max_turns=10)
    return Workflow([Step("fill", spec, "WINDOWTEST: run echo once.")], name="window")
"""
DOC = "## 现在在做什么\\n测试窗口。\\n\\n## 下一步\\n说 done。\\n"
SCENARIO = {
    "rules": [
        {
            "name": "doc",
            "when": {"last_user_contains": "上下文快满了"},
            "reply": [{"text": DOC.replace("\\n", "\n")}],
        },
        # 12,000 tokens of context: past the threshold of a 60K window (10K), far below 200K's (150K)
        {
            "name": "fill",
            "when": {"last_user_contains": "WINDOWTEST", "last_is_tool_result": False},
            "reply": [{"tool_use": {"name": "Bash", "input": {"command": "echo hi"}}}],
            "usage": {"input_tokens": 12000, "output_tokens": 10},
        },
        {"name": "done", "reply": [{"text": "done"}]},
    ]
}


def flower_run(tmp_path, srv, *args, window_env=None):  # type: ignore[no-untyped-def]
    env = {**os.environ, **srv.env(tmp_path / "cfg")}
    env.pop("FLOWER_WINDOW", None)
    if window_env is not None:
        env["FLOWER_WINDOW"] = window_env
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (tmp_path / "flow.py").write_text(FLOW)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "flower",
            "-w",
            str(ws),
            "-r",
            str(tmp_path / "runs"),
            "run",
            f"{tmp_path / 'flow.py'}:main",
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=180,
    )


def _handed_off(srv) -> bool:  # type: ignore[no-untyped-def]
    return any(r["rule"] == "doc" for r in message_requests(srv))


def test_a_small_window_from_the_environment_brings_the_handoff(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        out = flower_run(tmp_path, srv, window_env="60000")
        assert out.returncode == 0, out.stderr
        assert _handed_off(srv), [r["rule"] for r in message_requests(srv)]
    assert list(tmp_path.rglob("交接-fill.md")), "the handoff document was written"


def test_the_default_window_does_not_hand_off_at_the_same_context(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        out = flower_run(tmp_path, srv)
        assert out.returncode == 0, out.stderr
        assert not _handed_off(srv)


def test_a_bad_window_is_one_line_exit_2(tmp_path):
    with scripted(tmp_path, SCENARIO) as srv:
        bad_env = flower_run(tmp_path, srv, window_env="lots")
        bad_flag = flower_run(tmp_path, srv, "--window", "0")
    for out, word in ((bad_env, "FLOWER_WINDOW='lots'"), (bad_flag, "--window 0")):
        assert out.returncode == 2 and word in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
    assert not message_requests(srv)  # refused before any model call
