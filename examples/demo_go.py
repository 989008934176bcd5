"""The offline demo of the `flower` command itself (the starter flow), against the scripted model.

    .venv/bin/python examples/demo_go.py

In a fresh temporary project it runs what a person would type, one after the other:

1. `flower "make hello.txt say hi" --timeout 0` — clarify (one question, nobody answers, the
   assumption is recorded in 需求.md), set the goal (目标.md), work (a coordinator dispatches a
   worker that really writes hello.txt), judged: not_yet once (干活·判定#1), then achieved.
2. `flower --timeout 0` — a silent wake: the banner reports it; only the work step continues.
3. `flower "also add bye.txt" --timeout 0` — a wake with words: appended to 需求.md, 目标.md
   derived again, the words sent to the work session.

Everything the model says comes from examples/scenarios/starter.toml; every tool call (the
question, the files written and read) really runs in the real Claude Code CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from flower.cli.display import SCRIPTED_LABEL
from flower.scripted import Scenario, ScriptedServer

HERE = Path(__file__).resolve().parent
STEPS = [
    (["make hello.txt say hi", "--timeout", "0"], "a new task"),
    (["--timeout", "0"], "run again, nothing to add: continue"),
    (["also add bye.txt", "--timeout", "0"], "run again with more words"),
]


def main() -> int:
    project = Path(tempfile.mkdtemp(prefix="flower-go-demo-"))
    print(f"model: {SCRIPTED_LABEL}\nproject: {project}\n", flush=True)
    with ScriptedServer(
        Scenario.load(HERE / "scenarios" / "starter.toml"),
        log_path=project.parent / f"{project.name}-model.jsonl",
    ) as srv:
        env = {**os.environ, **srv.env(project.parent / f"{project.name}-claude-config")}
        for args, what in STEPS:
            shown = " ".join(f'"{a}"' if " " in a else a for a in args)
            print(f"\n$ flower {shown}      # {what}", flush=True)
            done = subprocess.run(
                [sys.executable, "-m", "flower", *args],
                cwd=project,
                env=env,
                stdin=subprocess.DEVNULL,
                check=False,
            )
            if done.returncode != 0:
                return done.returncode
    notes = project / ".flower" / "notes"
    for name in ("需求.md", "目标.md"):
        print(f"\n--- {notes / name}\n{(notes / name).read_text(encoding='utf-8')}", end="")
    for name in ("hello.txt", "bye.txt"):
        print(f"\n--- {project / name}: {(project / name).read_text(encoding='utf-8').strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
