"""A FlowerError becomes one line in one place, `flower.cli.app.main` (exit 2, its `kind` in
runs/.exit.json); the command modules never catch one only to print it the same way."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import flower.cli
from flower import errors

OURS = {
    name
    for name, value in vars(errors).items()
    if inspect.isclass(value) and issubclass(value, errors.FlowerError)
}


def _rewraps(handler: ast.ExceptHandler) -> bool:
    """`except <a FlowerError> as exc: fail(str(exc), ...)`: what main already does."""
    if handler.type is None:
        return False
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    if not any(isinstance(n, ast.Name) and n.id in OURS for n in names):
        return False
    first = handler.body[0]
    return (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Call)
        and isinstance(first.value.func, ast.Name)
        and first.value.func.id == "fail"
        and bool(first.value.args)
        and ast.unparse(first.value.args[0]) == f"str({handler.name})"
    )


def _handlers(source: str) -> list[ast.ExceptHandler]:
    return [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ExceptHandler)]


def test_the_check_sees_a_rewrap_and_leaves_other_handlers_alone() -> None:
    source = (
        "try:\n    x()\nexcept WorkflowError as exc:\n    fail(str(exc), kind='workflow')\n"
        "except ValueError as exc:\n    fail(str(exc))\n"
    )
    assert [_rewraps(h) for h in _handlers(source)] == [True, False]


def test_no_command_module_prints_a_flower_error_itself() -> None:
    root = Path(flower.cli.__file__).parent
    found = [
        f"{path.name}:{h.lineno}"
        for path in sorted(root.glob("*.py"))
        if path.name != "app.py"
        for h in _handlers(path.read_text(encoding="utf-8"))
        if _rewraps(h)
    ]
    assert found == []
