"""Pre-flight, the checks before anything runs (issue 11), the parts that need no Docker: a
matrix's size, include keys, scenarios, limits, workflow targets and imports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flower_batch.backend.docker.engine import EngineFacts
from flower_batch.errors import MatrixFileError, MatrixTooLarge
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobsfile import parse_jobs_text
from flower_batch.preflight import Preflight
from flower_batch.preflight.imports import Target, problems_by_target
from flower_batch.preflight.include_keys import include_warnings
from flower_batch.preflight.limits import cpus_problem, memory_problem, memory_warning
from flower_batch.preflight.scenarios import scenario_problems
from tests.batch_fixtures.jobs_text import jobs_text

FACTS = EngineFacts(ncpu=4, mem_total=8 * 1024**3)


# -- the size limit -------------------------------------------------------------------------
@st.composite
def matrices(draw: st.DrawFn) -> tuple[dict, list, list, int]:
    names = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True))
    axes = {n: draw(st.lists(st.integers(0, 4), min_size=1, max_size=4, unique=True)) for n in names}
    entry = st.dictionaries(st.sampled_from([*names, "x"]), st.integers(0, 5), min_size=1, max_size=2)
    include = draw(st.lists(entry, max_size=3))
    exclude = [
        e
        for e in draw(
            st.lists(
                st.dictionaries(
                    st.sampled_from(names),
                    st.sampled_from(sorted({v for vs in axes.values() for v in vs})),
                    min_size=1,
                    max_size=2,
                ),
                max_size=2,
            )
        )
        if all(v in axes[k] for k, v in e.items())
    ]
    return axes, [{"task": "t", **e} for e in include], exclude, draw(st.integers(1, 3))


@settings(max_examples=60, deadline=None)
@given(matrices())
def test_the_size_limit_counts_what_the_expansion_makes(
    tmp_path_factory: pytest.TempPathFactory, m: tuple
) -> None:
    axes, include, exclude, repeat = m
    path = tmp_path_factory.mktemp("size") / "jobs.toml"
    text = jobs_text(axes, include, exclude, repeat)
    try:
        made = len(parse_jobs_text(text, path=path).jobs)
    except MatrixFileError:
        return  # an invalid file (e.g. everything excluded) is reported the same either way
    # The limit sits exactly at what the expansion makes: allowed there, refused one below.
    assert len(parse_jobs_text(text, path=path, max_jobs=made).jobs) == made
    if made:
        with pytest.raises(MatrixTooLarge, match=f"makes {made:,} jobs"):
            parse_jobs_text(text, path=path, max_jobs=made - 1)


def test_a_huge_matrix_is_refused_in_one_line_naming_its_axes(tmp_path: Path) -> None:
    text = jobs_text({"a": list(range(100)), "b": list(range(100)), "c": list(range(20))})
    with pytest.raises(MatrixTooLarge) as caught:
        parse_jobs_text(text, path=tmp_path / "jobs.toml", max_jobs=10_000)
    (line,) = [str(e) for e in caught.value.errors]
    assert "makes 200,000 jobs (task 1 × a 100 × b 100 × c 20), more than 10,000" in line
    assert "--allow-large" in line


# -- include keys --------------------------------------------------------------------------------
def test_a_misspelt_include_key_warns_with_the_axis_and_still_adds_a_combination(tmp_path: Path) -> None:
    text = '[tasks.t]\nprompt = "p"\n[matrix]\nvariant = ["v1", "v2"]\ninclude = [{ varient = "v1" }, { style = "x" }]\n'
    path = tmp_path / "jobs.toml"
    path.write_text(text)
    jf = parse_jobs_text(text, path=path)
    assert len(jf.jobs) == 2  # GitHub Actions: both entries match every combination (no axis keys)
    (warning,) = include_warnings(path, jf.axes)
    assert warning.startswith(
        "jobs.toml:5: matrix.include[0].varient: names no axis (did you mean `variant`?)"
    )


# -- scenarios -----------------------------------------------------------------------------------
def test_scenarios_are_parsed_by_the_gateway_code_and_keep_their_markup(tmp_path: Path) -> None:
    typo = tmp_path / "typo.toml"
    typo.write_text('[[rules]]\nreplyy = "hi"\n')
    empty = tmp_path / "empty.toml"
    empty.write_text('name = "x"\n')
    good = tmp_path / "good.toml"
    good.write_text('[[rules]]\nreply = "hi"\n')
    lines = scenario_problems([typo, empty, good, typo])
    assert lines == [
        f"{typo}: rule #1: field 'replyy': unknown rule field; did you mean 'reply'?",
        f"{empty}: field 'rules': needs a non-empty list of rules, e.g. [[rules]] reply = [{{text = \"hi\"}}]",
    ]


def test_a_recording_to_replay_is_read_before_anything_starts(tmp_path: Path) -> None:
    from flower_batch.gateway.recording import FORMAT, RECORDING
    from flower_batch.jobmodel.spec import GatewaySpec

    def job_folder(name: str, *lines: dict) -> Path:
        folder = tmp_path / name
        (folder / "logs").mkdir(parents=True)
        (folder / "logs" / RECORDING).write_text("".join(json.dumps(line) + "\n" for line in lines))
        return folder

    good = job_folder("good", {"format": FORMAT, "seq": 1}, {"format": FORMAT, "seq": 2})
    newer = job_folder(
        "newer", {"format": FORMAT, "seq": 1}, {"format": "flower-batch/recording@2", "seq": 2}
    )
    other = job_folder("other", {"format": "flower-scripted/requests@2", "nth": 1})
    pf = Preflight(lambda f, v, jobs: f"{f} {v}")
    pf.add_jobs(
        [
            _job(str(i), gateway=GatewaySpec(mode="replay", recording=folder))
            for i, folder in enumerate([good, newer, other, tmp_path / "none", newer])
        ]
    )
    assert pf.problems == [
        f"{newer / 'logs' / RECORDING}: exchange 2 was written as flower-batch/recording@2, newer than this "
        f"flower-batch reads ({FORMAT}): upgrade flower-batch",
        f"{other / 'logs' / RECORDING}: exchange 1 is not a flower-batch recording (format "
        f"'flower-scripted/requests@2', expected {FORMAT})",
        f"no recording to replay at {tmp_path / 'none'}",
    ]


# -- limits --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("memory", "words"),
    [
        (1024**2, "below Docker's minimum of 6m"),
        (6 * 1024**2, None),
        (9 * 1024**3, None),
    ],
)
def test_memory_limits(memory: int, words: str | None) -> None:
    problem = memory_problem(memory, FACTS)
    assert (problem is None) if words is None else (words in (problem or ""))


def test_memory_over_the_host_is_a_warning_since_docker_accepts_it() -> None:
    assert "more than the Docker host has (8g), so it limits nothing" in (
        memory_warning(9 * 1024**3, FACTS) or ""
    )
    assert memory_warning(8 * 1024**3, FACTS) is None


@pytest.mark.parametrize(
    ("cpus", "words"), [(0.5, None), (4, None), (4.5, "more than the 4 CPU(s)"), (0, "positive")]
)
def test_cpu_limits(cpus: float, words: str | None) -> None:
    problem = cpus_problem(cpus, FACTS)
    assert (problem is None) if words is None else (words in (problem or ""))


def _job(job_id: str = "j", **fields: object) -> JobSpec:
    return JobSpec(id=job_id, task="t", variant="v", repeat=1, matrix={}, prompt="p", **fields)  # type: ignore[arg-type]


def test_preflight_names_each_problem_once_with_its_origin(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text("x = 1\n")
    pf = Preflight(lambda f, v, jobs: f"{f} {v} ({len(jobs)} jobs)")
    pf.add_jobs(
        [
            _job("a", workflow="flow.py:main", memory_bytes=1024),
            _job("b", workflow="flow.py:main"),
            _job("c", workflow="flows.py:main", cpus=64.0),
        ],
        search=[tmp_path],
    )
    assert pf.problems[0] == "memory 1k (1 jobs): 1k is below Docker's minimum of 6m; give at least 6m"
    assert pf.problems[1].startswith("workflow flow.py:main (2 jobs): flow.py not found")
    assert pf.problems[1].endswith("(did you mean flows.py?)")
    assert len(pf.problems) == 2  # cpus 64 needs the engine's facts; flows.py:main is left to the container
    assert [t.written for t in pf.targets] == ["flows.py:main"]


def test_a_missing_flows_copy_is_a_problem_not_a_docker_error(tmp_path: Path) -> None:
    pf = Preflight(lambda f, v, jobs: f"job x: {f} {v}")
    pf.add_jobs([_job(workflow="flows.py:main")], flows_dir=tmp_path / "gone")
    assert pf.problems == [
        f"job x: workflow flows.py:main: the job's copy of its workflow code ({tmp_path / 'gone'}) is missing"
    ]


def test_the_import_report_names_a_process_killer_and_what_it_left_unchecked() -> None:
    targets = [Target("a.py:main", "A"), Target("b.py:main", "B"), Target("c.py:main", "C")]
    argv = [
        "/flows/0",
        "/flows/0/a.py:main",
        "/flows/1",
        "/flows/1/b.py:main",
        "/flows/2",
        "/flows/2/c.py:main",
    ]
    lines = [
        '{"start": "/flows/0/a.py:main"}',
        "noise the module printed",
        json.dumps(
            {
                "target": "/flows/0/a.py:main",
                "error": "target '/flows/0/a.py:main': /flows/0/a.py has no attribute 'main'",
            }
        ),
        '{"start": "/flows/1/b.py:main"}',
    ]
    assert list(problems_by_target(targets, argv, lines, 3, False, 120).values()) == [
        "A: a.py has no attribute 'main'",
        "B: importing it ended the Python process (exit code 3)",
        "C: not checked: an earlier workflow's import ended the check",
    ]
    assert (
        list(problems_by_target(targets[:2], argv[:4], lines, None, True, 120).values())[1]
        == "B: importing it did not finish within 120s"
    )


def test_a_misspelt_module_target_gets_a_did_you_mean(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text("x = 1\n")
    pf = Preflight(lambda f, v, jobs: f"{f} {v}")
    pf.add_jobs([_job(workflow="flow:main")], search=[tmp_path])
    (line,) = pf.problems
    assert line.startswith("workflow flow:main: module flow not found") and line.endswith(
        "(did you mean flows?)"
    )


@pytest.mark.parametrize(
    "target", ["a\x00b.py:main", ("z" * 300) + ".py:main", "pkg." + ("z" * 300) + ":main"]
)
def test_an_unusable_target_path_is_one_line(tmp_path: Path, target: str) -> None:
    pf = Preflight(lambda f, v, jobs: f"{f} X")
    pf.add_jobs([_job(workflow=target)], search=[tmp_path])
    (line,) = pf.problems
    assert line.startswith("workflow X: ") and "\n" not in line


def test_a_cluster_that_cannot_hold_a_reservation_is_one_line_per_size() -> None:
    import anyio

    from tests.fake_backend import FakeBackend

    class Small(FakeBackend):
        async def reservation_problem(
            self, cpus: float | None, memory: int | None, placement: list[str]
        ) -> str | None:
            return f"it reserves {memory} bytes but no node has that much" if (memory or 0) > 2**30 else None

    pf = Preflight(lambda f, v, jobs: f"{f} {v} ({len(jobs)} jobs)")
    pf.add_jobs(
        [_job("a", memory_bytes=2**31), _job("b", memory_bytes=2**31), _job("c", memory_bytes=2**20 * 64)]
    )

    async def go() -> None:
        async with Small() as backend:
            await pf.check_cluster(backend, FakeBackend.IMAGE)

    anyio.run(go)
    assert pf.problems == [
        f"memory 2g (2 jobs): no node of the cluster can hold it: it reserves {2**31} bytes but "
        "no node has that much"
    ]
