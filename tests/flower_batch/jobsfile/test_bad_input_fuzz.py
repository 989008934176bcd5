"""Property-based fuzz of jobs.toml and scenario TOML (issue 11): keys dropped, renamed, retyped,
values made bad. Whatever the file says, the answer is a valid plan or one line per problem —
never a traceback, never a write next to the file or into the home.

Sized for CI: the parse and the host-side pre-flight run in-process (no Docker per example);
a handful of examples go through the real `flower-batch matrix --dry-run`.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flower.scripted import Scenario, ScenarioError
from flower_batch.errors import MatrixFileError
from flower_batch.jobsfile import MAX_JOBS, parse_jobs_text
from flower_batch.preflight import Preflight
from flower_batch.preflight.include_keys import include_warnings
from flower_batch.preflight.scenarios import scenario_problems
from tests.batch_fixtures.campaign import fingerprint, problem_lines
from tests.batch_fixtures.rig import fb, project_copy, runtime_image

JOBS: dict[str, Any] = {
    "batch": {"name": "fuzz", "budget_usd": 1.5},
    "defaults": {
        "workflow": "flows.py:solo",
        "prompt": "Read TASK.md",
        "timeout": "2m",
        "memory": "512m",
        "cpus": 1,
        "gateway": {"mode": "scripted", "scenario": "scenarios/quick.toml"},
    },
    "tasks": {
        "alpha": {"workspace": "tasks/alpha", "check": "grep -qx alpha answer.txt", "description": "a"},
        "beta": {"workspace": "tasks/beta", "env": {"STYLE": "terse"}, "args": {"n": 2}},
    },
    "matrix": {
        "variant": [
            {"name": "solo", "workflow": "flows.py:solo"},
            {"name": "duo", "workflow": "flows.py:duo"},
        ],
        "repeat": 2,
        "exclude": [{"task": "beta", "variant": "duo"}],
        "include": [{"variant": "solo", "timeout": "90s"}],
    },
    "jobs": [{"name": "extra", "task": "alpha", "prompt": "again", "repeat": 1}],
}

SCENARIO: dict[str, Any] = {
    "description": "fuzz",
    "defaults": {"usage": {"input_tokens": 1000, "output_tokens": 100}},
    "rules": [
        {
            "name": "read",
            "last_is_tool_result": False,
            "last_user_contains": "TASK.md",
            "reply": [
                {"text": "Reading."},
                {"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/TASK.md"}}},
            ],
        },
        {
            "name": "done",
            "last_is_tool_result": True,
            "tool_result_contains": "answer",
            "reply": "Done.",
            "times": 2,
        },
    ],
}

BAD_VALUES = st.one_of(
    st.integers(-3, 3),
    st.sampled_from(
        [
            0,
            -1,
            10**12,
            1.5,
            -0.5,
            True,
            False,
            "",
            " ",
            "1m",
            "ten",
            "0",
            "flow.py:main",
            "a:b:c",
            "${{ matrix.nope }}",
            "../../etc",
            "[[rules]]",
            "[red]x[/red]",
            "\u00e9\u4e2d",
            [],
            [1, "a"],
            {},
            {"x": 1},
        ]
    ),
    st.text(max_size=8),
)


def key_paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*prefix, k)
            yield from key_paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield (*prefix, i)
            yield from key_paths(v, (*prefix, i))


def _typo(key: str, draw: st.DrawFn) -> str:
    if not key:
        return "x"
    i = draw(st.integers(0, len(key) - 1))
    how = draw(st.sampled_from(["drop", "double", "swap", "other"]))
    if how == "drop":
        return key[:i] + key[i + 1 :] or "k"
    if how == "double":
        return key[:i] + key[i] + key[i:]
    if how == "swap" and i + 1 < len(key):
        return key[:i] + key[i + 1] + key[i] + key[i + 2 :]
    return draw(st.sampled_from(["varient", "workfow", "timout", "repyl", "rule", "nmae", "when", "Prompt"]))


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(key_paths(doc))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = doc
        for part in path[:-1]:
            parent = parent[part]
        last = path[-1]
        op = draw(st.sampled_from(["drop", "rename", "retype", "bad"]))
        if op == "drop":
            del parent[last]
        elif op == "rename" and isinstance(last, str):
            parent[_typo(last, draw)] = parent.pop(last)
        elif op == "retype":
            value = parent[last]
            parent[last] = draw(
                st.sampled_from(
                    [
                        str(value),
                        [value],
                        {"v": value},
                        1 if not isinstance(value, int) else "1",
                        value is None,
                    ]
                )
            )
        else:
            parent[last] = copy.deepcopy(
                draw(BAD_VALUES)
            )  # sampled lists/tables are shared: never mutate them
    return doc


# -- a small TOML writer (tests only: the stdlib reads TOML but does not write it) --------------
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: Any) -> str:
    k = str(k)
    return k if _BARE.match(k) else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def to_toml(doc: dict[str, Any]) -> str:
    plain = [f"{_key(k)} = {_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    tables = [
        f"[{_key(k)}]\n" + "".join(f"{_key(kk)} = {_value(vv)}\n" for kk, vv in v.items())
        for k, v in doc.items()
        if isinstance(v, dict)
    ]
    return "\n".join(plain) + "\n" + "\n".join(tables)


# -- what every answer must look like --------------------------------------------------------------
def assert_one_line_each(lines: list[str]) -> None:
    for line in lines:
        assert line.strip() and "\n" not in line and "Traceback" not in line, repr(line)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return project_copy(tmp_path_factory.mktemp("fuzz") / "project")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=mutated(JOBS))
def test_a_mutated_jobs_file_is_a_plan_or_one_line_per_problem(project: Path, doc: dict[str, Any]) -> None:
    text = to_toml(doc)
    before = fingerprint(project)
    try:
        jf = parse_jobs_text(text, path=project / "jobs.toml", max_jobs=MAX_JOBS)
    except MatrixFileError as exc:
        assert exc.errors, "an error with no problem in it"
        assert_one_line_each([str(e) for e in exc.errors])
        assert all(str(e).startswith(str(project / "jobs.toml")) for e in exc.errors)
    else:
        pf = Preflight(lambda f, v, jobs: f'jobs.toml: {f} "{v}"')
        pf.add_jobs(list(jf.jobs), search=[project])
        (project / "jobs.toml").write_text(text)
        try:
            assert_one_line_each(pf.problems + include_warnings(project / "jobs.toml", jf.axes))
        finally:
            (project / "jobs.toml").unlink()
    assert fingerprint(project) == before


@settings(max_examples=150, deadline=None)
@given(doc=mutated(SCENARIO))
def test_a_mutated_scenario_loads_or_says_one_line(doc: dict[str, Any]) -> None:
    text = to_toml(doc)
    try:
        Scenario.from_toml(text, source="s.toml")
    except ScenarioError as exc:
        assert_one_line_each([str(exc)])
        assert str(exc).startswith("s.toml: ")


def test_the_preflight_reads_scenarios_as_the_gateway_does(tmp_path: Path) -> None:
    """The same verdict as Scenario.load for a handful of mutations, through the files pre-flight reads."""
    for i, doc in enumerate(
        [SCENARIO, {**SCENARIO, "rulez": []}, {"rules": [{"repyl": "x"}]}, {"rules": []}]
    ):
        path = tmp_path / f"s{i}.toml"
        path.write_text(to_toml(doc))
        try:
            Scenario.load(path)
            expected: list[str] = []
        except ScenarioError as exc:
            expected = [str(exc)]
        assert scenario_problems([path]) == expected


# -- a handful through the real command ------------------------------------------------------------
@pytest.mark.docker
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=mutated(JOBS))
def test_mutated_jobs_files_through_the_real_command(
    project: Path, tmp_path_factory: pytest.TempPathFactory, doc: dict[str, Any]
) -> None:
    where = tmp_path_factory.mktemp("cmd")
    shutil.copytree(project, where / "project")
    (where / "project" / "jobs.toml").write_text(to_toml(doc))
    home = where / "home"
    home.mkdir()
    proc = fb(
        "matrix",
        "jobs.toml",
        "--dry-run",
        "--image",
        runtime_image(),
        home=home,
        cwd=where / "project",
        timeout=120,
    )
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text, text
    assert proc.returncode in (0, 2), text
    lines = problem_lines(proc.stderr)
    assert_one_line_each(lines)
    if proc.returncode == 2:
        assert lines and all(re.match(r"^(flower-batch: |jobs\.toml|warning: )", line) for line in lines), (
            lines
        )
    assert fingerprint(home) == {"./": "dir"}  # not even the batch folder
