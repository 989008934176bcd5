"""Every text the model or the person reads lives in flower/catalogue/, in its owner's module
(issue 12): no string literal with Chinese in it anywhere else in flower/ or flower_batch/ —
flower_batch uses flower's catalogue instead of copying its words. Docstrings and comments may
quote the texts freely."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import flower
import flower_batch
from flower import catalogue
from flower.catalogue.readback import BRIEF_ALIASES
from flower.catalogue.starter import (
    BRIEF_SECTIONS,
    ISOLATE_HEADING,
    ISOLATE_RULES,
    WORKTREE_BRANCH_SLOT,
    WORKTREE_PATH_SLOT,
)

CATALOGUE = Path(catalogue.__file__).resolve().parent
# CJK ideographs, CJK punctuation (、。「」) and full-width forms (：，（）).
CJK = re.compile(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]")


def _documentation(tree: ast.AST) -> set[int]:
    """The string constants that are documentation: docstrings and bare string statements
    (an attribute's docstring), never evaluated as a text anyone reads."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def cjk_literals(source: str, name: str = "<source>") -> list[str]:
    """`name:line: 'text'` for every string literal (f-string parts included) with CJK in it."""
    tree = ast.parse(source)
    docs = _documentation(tree)
    return [
        f"{name}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and CJK.search(node.value)
    ]


def _scan(package: Path) -> list[str]:
    found: list[str] = []
    for path in sorted(package.rglob("*.py")):
        if CATALOGUE not in path.resolve().parents:
            found += cjk_literals(path.read_text(encoding="utf-8"), str(path.relative_to(package.parent)))
    return found


def test_the_detector_finds_texts_and_skips_documentation() -> None:
    source = '''
"""模块说明 is documentation."""
X = "plain"
def f(step):
    """函数说明."""
    # 注释 is a comment
    return f"{step} 缺 {X}", "：", ("ok", "判定")
class C:
    field: int = 0
    """属性说明 is documentation too."""
'''
    found = cjk_literals(source)
    assert sorted(line.split(": ", 1)[1] for line in found) == ["' 缺 '", "'判定'", "'：'"], found


def test_no_chinese_literal_in_flower_outside_the_catalogue() -> None:
    assert _scan(Path(flower.__file__).parent) == []


def test_flower_batch_uses_flowers_catalogue_instead_of_copying_its_words() -> None:
    assert _scan(Path(flower_batch.__file__).parent) == []


def test_the_brief_aliases_name_exactly_the_brief_sections() -> None:
    assert tuple(BRIEF_ALIASES) == BRIEF_SECTIONS
    assert all(key in aliases for key, aliases in BRIEF_ALIASES.items())  # a section is its own alias


def test_the_isolation_rules_start_with_the_heading_that_marks_them() -> None:
    assert ISOLATE_RULES.startswith(ISOLATE_HEADING + "\n")
    assert WORKTREE_PATH_SLOT in ISOLATE_RULES  # roles fill both in per worker
    assert WORKTREE_BRANCH_SLOT in ISOLATE_RULES
