"""List the functions of flower/ and flower_batch/ longer than 60 lines (decorators to last line).

    python scripts/long_functions.py          every function over the limit, longest last
    python scripts/long_functions.py --check  exit 1 if one of them gives no reason, or if one
                                              is over 80 lines whatever it says

A function may be longer than 60 lines when it says why: a `# long: <reason>` comment on its `def`
line or on the line above it (above its decorators, if it has any). None may be over 80: split it
into named pieces.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("flower", "flower_batch")
LIMIT = 60
HARD_LIMIT = 80
MARK = "# long:"


@dataclass(frozen=True)
class Long:
    path: str
    line: int
    name: str
    lines: int
    reason: str | None

    def __str__(self) -> str:
        why = f"  ({self.reason})" if self.reason else "  NO REASON"
        return f"{self.lines:4d} {self.path}:{self.line} {self.name}{why}"


def _reason(lines: list[str], *numbers: int) -> str | None:
    for number in numbers:  # 1-based line numbers
        if 1 <= number <= len(lines) and MARK in lines[number - 1]:
            return lines[number - 1].split(MARK, 1)[1].strip() or None
    return None


def long_functions(root: Path = REPO, limit: int = LIMIT) -> list[Long]:
    found: list[Long] = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            lines = text.splitlines()
            for node in ast.walk(ast.parse(text)):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                size = (node.end_lineno or node.lineno) - first + 1
                if size > limit:
                    reason = _reason(lines, node.lineno, first - 1)
                    found.append(Long(str(path.relative_to(root)), node.lineno, node.name, size, reason))
    return sorted(found, key=lambda f: (f.lines, f.path))


def main(argv: list[str]) -> int:
    found = long_functions()
    for item in found:
        print(item)
    unexplained = [f for f in found if f.reason is None]
    too_long = [f for f in found if f.lines > HARD_LIMIT]
    if "--check" in argv and unexplained:
        print(
            f"{len(unexplained)} function(s) over {LIMIT} lines without a `{MARK} <reason>` comment",
            file=sys.stderr,
        )
    if "--check" in argv and too_long:
        print(f"{len(too_long)} function(s) over {HARD_LIMIT} lines: split them", file=sys.stderr)
    return 1 if "--check" in argv and (unexplained or too_long) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
