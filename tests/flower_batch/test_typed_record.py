"""The job record is typed at the file, and the budget has one owner (issue 32):

- no job status is compared with a string outside the state enum (jobmodel/status.py);
- nothing above jobmodel reads a record's raw JSON (`record.spec.get(`, `json.loads` of a
  record.json) or rebuilds its spec (`JobSpec.from_dict(record.spec)`);
- "is the cap reached?" is decided only by jobmodel/budget.py: no `spent >= cap` elsewhere.

Each check walks the source with `ast`, so a new offender fails here with its file and line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower_batch.jobmodel.status import Phase, Status

PACKAGE = Path(__file__).resolve().parents[2] / "flower_batch"
STATUS_WORDS = {s.value for s in Status} | {Phase.CHECKING.value}
# Container and swarm-task states ("running", "exited") are the engine's words, not a job's.
ENGINE_FOLDERS = ("backend", "gateway")


def modules(skip: tuple[str, ...] = ()) -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if any(rel.startswith(f"flower_batch/{s}") for s in skip):
            continue
        yield rel, ast.parse(path.read_text(encoding="utf-8"))


def words(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(words(e) for e in node.elts)) if node.elts else set()
    return set()


def names_a_status(node: ast.AST) -> bool:
    """`status`, `x.status`, `status_of(...)`, `record.state`, `state`: what holds a job's state."""
    if isinstance(node, ast.Call):
        node = node.func
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return "status" in name or name == "state"


def status_literal_compares(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        literal = set().union(*(words(o) for o in operands)) & STATUS_WORDS
        if literal and any(names_a_status(o) for o in operands):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        # `{"passed": ...}.get(status)`: a table of statuses keyed by strings
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Dict)
            and any(words(k) & STATUS_WORDS for k in node.func.value.keys if k is not None)
            and node.args
            and names_a_status(node.args[0])
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_no_status_is_compared_with_a_string_outside_the_enum() -> None:
    offenders = [
        f"{rel}:{where}"
        for rel, tree in modules(skip=("jobmodel/status.py", *ENGINE_FOLDERS))
        for where in status_literal_compares(tree)
    ]
    assert offenders == [], "compare with Status.X (jobmodel/status.py):\n" + "\n".join(offenders)


def raw_record_reads(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        # record.spec.get(...), record.spec[...]
        target = (
            node.func.value if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else None
        )
        if isinstance(node, ast.Subscript):
            target = node.value
        if (
            isinstance(target, ast.Attribute)
            and target.attr == "spec"
            and (
                isinstance(node, ast.Subscript) or node.func.attr == "get"  # type: ignore[union-attr]
            )
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
        # data["spec"], data.get("spec"): a record's raw JSON read for its spec
        key = None
        if isinstance(node, ast.Subscript):
            key = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            key = node.args[0] if node.args else None
        if isinstance(key, ast.Constant) and key.value == "spec":
            found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
        # JobSpec.from_dict(<anything>.spec): a typed record's spec rebuilt
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "from_dict"
            and ast.unparse(node.func.value) == "JobSpec"
            and node.args
            and isinstance(node.args[0], ast.Attribute)
            and node.args[0].attr == "spec"
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_nothing_above_jobmodel_reads_a_records_raw_spec() -> None:
    offenders = [
        f"{rel}:{where}" for rel, tree in modules(skip=("jobmodel",)) for where in raw_record_reads(tree)
    ]
    assert offenders == [], "read the typed record (JobRecord.spec is a JobSpec):\n" + "\n".join(offenders)


def cap_decisions(tree: ast.Module) -> list[str]:
    """`spent >= cap`-shaped comparisons: one side names a spend, the other a cap or budget."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or not any(
            isinstance(op, ast.GtE | ast.Gt | ast.LtE | ast.Lt) for op in node.ops
        ):
            continue
        text = [ast.unparse(o).lower() for o in (node.left, *node.comparators)]
        spends = any("spent" in t or "spend" in t for t in text)
        caps = any("budget" in t or "cap" in t for t in text)
        if spends and caps:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_budget_is_decided_only_by_its_type() -> None:
    offenders = [
        f"{rel}:{where}"
        for rel, tree in modules(skip=("jobmodel/budget.py",))
        for where in cap_decisions(tree)
    ]
    assert offenders == [], "ask jobmodel.budget.Budget(cap).reached(spent):\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    ("source", "check"),
    [
        ("if record.status == 'passed': pass", status_literal_compares),
        ("x = record.status in ('queued', 'running')", status_literal_compares),
        ("c = {'passed': 'green'}.get(record.status, 'red')", status_literal_compares),
        ("x = record.spec.get('persistent')", raw_record_reads),
        ("x = JobSpec.from_dict(record.spec)", raw_record_reads),
        ("x = data.get('spec') or {}", raw_record_reads),
        ("x = data['spec']['task']", raw_record_reads),
        ("x = spent >= job.budget_usd", cap_decisions),
        ("x = meter.spent_usd >= cap", cap_decisions),
    ],
)
def test_each_check_catches_its_offender(source: str, check) -> None:
    assert check(ast.parse(source)), source


def test_container_states_and_budget_words_elsewhere_are_not_offenders() -> None:
    assert not status_literal_compares(ast.parse("x = c.state_of == 'exited'\ny = kind == 'error'"))
    assert not cap_decisions(ast.parse("x = len(budget_history) > 0"))
