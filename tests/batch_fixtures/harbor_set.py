"""A generated Harbor task set of any size, for the planning test and bench/harbor_plan.py: each
task a small folder (task.toml, instruction.md, tests/test.sh, solution/solve.sh and a two-line
environment/Dockerfile FROM one shared base), and a jobs.toml naming the set.

    write_taskset(root, 500) -> root/jobs.toml      (root/tasks/task-0001 ... task-0500)
    python -m tests.batch_fixtures.harbor_set DIR [COUNT]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.batch_fixtures.task_images import DEBIAN13

SCENARIO = {"rules": [{"reply": [{"text": "done"}]}]}


def write_taskset(root: Path, count: int, base: str = DEBIAN13) -> Path:
    """`count` task folders under `root/tasks` and `root/jobs.toml` (scripted model); the jobs file."""
    tasks = root / "tasks"
    for number in range(1, count + 1):
        _task(tasks / f"task-{number:04d}", number, base)
    (root / "scenario.json").write_text(json.dumps(SCENARIO))
    jobs = root / "jobs.toml"
    jobs.write_text(
        '[batch]\nname = "harbor-set"\n\n'
        '[defaults]\ngateway = { mode = "scripted", scenario = "scenario.json" }\n\n'
        '[tasksets.generated]\nharbor = "tasks"\n'
    )
    return jobs


def _task(folder: Path, number: int, base: str) -> None:
    for part in ("environment", "tests", "solution"):
        (folder / part).mkdir(parents=True, exist_ok=True)
    (folder / "task.toml").write_text(
        'version = "1.1"\n\n[metadata]\ndifficulty = "easy"\ncategory = "generated"\n'
        f'tags = ["generated", "n{number % 10}"]\n\n[verifier]\ntimeout_sec = 30.0\n\n'
        "[agent]\ntimeout_sec = 120.0\n"
    )
    (folder / "instruction.md").write_text(f"Write the number {number} to /app/answer.txt.\n")
    (folder / "environment" / "Dockerfile").write_text(
        f"FROM {base}\nRUN mkdir -p /app && echo {number} > /app/number\nWORKDIR /app\n"
    )
    test = folder / "tests" / "test.sh"
    test.write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        f'if [ "$(cat /app/answer.txt 2>/dev/null)" = "{number}" ]; then echo 1; else echo 0; fi'
        " > /logs/verifier/reward.txt\n"
    )
    solve = folder / "solution" / "solve.sh"
    solve.write_text(f"#!/bin/bash\necho {number} > /app/answer.txt\n")
    for script in (test, solve):
        script.chmod(0o755)


if __name__ == "__main__":
    target = Path(sys.argv[1])
    print(write_taskset(target, int(sys.argv[2]) if len(sys.argv) > 2 else 500))
