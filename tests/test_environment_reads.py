"""Settings reach the code that uses them as arguments: the process environment is read only
where a process starts (flower's main, flower-batch's commands, the gateway container's entry,
a swarm task's entry), and handed down from there."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENTRIES = {
    "flower/cli/app.py",
    "flower_batch/gateway/server/__main__.py",
    "flower_batch/backend/swarm/task_signals.py",
}
COMMANDS = "flower_batch/commands/"


def environment_reads(tree: ast.AST) -> list[int]:
    """Lines that read os.environ / os.getenv / os.environb, or import them by name."""
    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("environ", "environb", "getenv", "getenvb")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            lines += [node.lineno for a in node.names if a.name in ("environ", "environb", "getenv")]
    return lines


def test_the_environment_is_read_only_where_a_process_starts() -> None:
    found = []
    for package in ("flower", "flower_batch"):
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel in ENTRIES or rel.startswith(COMMANDS):
                continue
            found += [f"{rel}:{n}" for n in environment_reads(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == [], "read the setting where the process starts and pass it down: " + ", ".join(found)


def test_the_check_sees_every_form_of_read() -> None:
    code = "import os\nfrom os import environ\na = os.environ['X']\nb = os.getenv('Y')\nc = os.environ.get('Z')\n"
    assert environment_reads(ast.parse(code)) == [2, 3, 4, 5]
