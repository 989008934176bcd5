"""Pre-flight and attempts, the parts that need no Docker (issue 11)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flower_batch.backend.docker_engine import EngineFacts
from flower_batch.commands.plan_summary import plan_lines
from flower_batch.errors import MatrixTooLarge
from flower_batch.layout import Home
from flower_batch.matrix import (
    JobSpec,
    MatrixFileError,
    new_record,
    parse_jobs_text,
    plan_resume,
    write_record,
)
from flower_batch.preflight import Preflight, include_warnings
from flower_batch.preflight.imports import Target, _problems
from flower_batch.preflight.limits import cpus_problem, memory_problem, memory_warning
from flower_batch.preflight.scenarios import scenario_problems
from flower_batch.running.attempts import attempt_numbers, keep_previous_attempt, list_attempts, prunable

FACTS = EngineFacts(ncpu=4, mem_total=8 * 1024**3)


def jobs_text(axes: dict[str, list[int]], include: list[dict] = (), exclude: list[dict] = (), repeat: int = 1) -> str:
    def inline(d: dict) -> str:
        return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in d.items()) + " }"

    lines = ['[tasks.t]', 'prompt = "p"', "[matrix]", f"repeat = {repeat}"]
    lines += [f"{name} = {json.dumps(values)}" for name, values in axes.items()]
    if include:
        lines.append(f"include = [{', '.join(inline(e) for e in include)}]")
    if exclude:
        lines.append(f"exclude = [{', '.join(inline(e) for e in exclude)}]")
    return "\n".join(lines) + "\n"


# -- the size limit -------------------------------------------------------------------------
@st.composite
def matrices(draw: st.DrawFn) -> tuple[dict, list, list, int]:
    names = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True))
    axes = {n: draw(st.lists(st.integers(0, 4), min_size=1, max_size=4, unique=True)) for n in names}
    entry = st.dictionaries(st.sampled_from([*names, "x"]), st.integers(0, 5), min_size=1, max_size=2)
    include = draw(st.lists(entry, max_size=3))
    exclude = [e for e in draw(st.lists(st.dictionaries(st.sampled_from(names), st.sampled_from(
        sorted({v for vs in axes.values() for v in vs})), min_size=1, max_size=2), max_size=2))
        if all(v in axes[k] for k, v in e.items())]
    return axes, [{"task": "t", **e} for e in include], exclude, draw(st.integers(1, 3))


@settings(max_examples=60, deadline=None)
@given(matrices())
def test_the_size_limit_counts_what_the_expansion_makes(tmp_path_factory: pytest.TempPathFactory, m: tuple) -> None:
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
    assert warning.startswith("jobs.toml:5: matrix.include[0].varient: names no axis (did you mean `variant`?)")


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


# -- limits --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("memory", "words"), [
    (1024**2, "below Docker's minimum of 6m"), (6 * 1024**2, None), (9 * 1024**3, None),
])
def test_memory_limits(memory: int, words: str | None) -> None:
    problem = memory_problem(memory, FACTS)
    assert (problem is None) if words is None else (words in (problem or ""))


def test_memory_over_the_host_is_a_warning_since_docker_accepts_it() -> None:
    assert "more than the Docker host has (8g), so it limits nothing" in (memory_warning(9 * 1024**3, FACTS) or "")
    assert memory_warning(8 * 1024**3, FACTS) is None


@pytest.mark.parametrize(("cpus", "words"), [(0.5, None), (4, None), (4.5, "more than the 4 CPU(s)"), (0, "positive")])
def test_cpu_limits(cpus: float, words: str | None) -> None:
    problem = cpus_problem(cpus, FACTS)
    assert (problem is None) if words is None else (words in (problem or ""))


def _job(job_id: str = "j", **fields: object) -> JobSpec:
    return JobSpec(id=job_id, task="t", variant="v", repeat=1, matrix={}, prompt="p", **fields)  # type: ignore[arg-type]


def test_preflight_names_each_problem_once_with_its_origin(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text("x = 1\n")
    pf = Preflight(lambda f, v, jobs: f"{f} {v} ({len(jobs)} jobs)")
    pf.add_jobs([_job("a", workflow="flow.py:main", memory_bytes=1024), _job("b", workflow="flow.py:main"),
                 _job("c", workflow="flows.py:main", cpus=64.0)], search=[tmp_path])
    assert pf.problems[0] == "memory 1k (1 jobs): 1k is below Docker's minimum of 6m; give at least 6m"
    assert pf.problems[1].startswith("workflow flow.py:main (2 jobs): flow.py not found")
    assert pf.problems[1].endswith("(did you mean flows.py?)")
    assert len(pf.problems) == 2  # cpus 64 needs the engine's facts; flows.py:main is left to the container
    assert [t.written for t in pf.targets] == ["flows.py:main"]


def test_a_missing_flows_copy_is_a_problem_not_a_docker_error(tmp_path: Path) -> None:
    pf = Preflight(lambda f, v, jobs: f"job x: {f} {v}")
    pf.add_jobs([_job(workflow="flows.py:main")], flows_dir=tmp_path / "gone")
    assert pf.problems == [f"job x: workflow flows.py:main: the job's copy of its workflow code ({tmp_path / 'gone'}) is missing"]


def test_the_import_report_names_a_process_killer_and_what_it_left_unchecked() -> None:
    targets = [Target("a.py:main", "A"), Target("b.py:main", "B"), Target("c.py:main", "C")]
    argv = ["/flows/0", "/flows/0/a.py:main", "/flows/1", "/flows/1/b.py:main", "/flows/2", "/flows/2/c.py:main"]
    lines = ['{"start": "/flows/0/a.py:main"}', "noise the module printed",
             json.dumps({"target": "/flows/0/a.py:main", "error": "target '/flows/0/a.py:main': /flows/0/a.py has no attribute 'main'"}),
             '{"start": "/flows/1/b.py:main"}']
    assert _problems(targets, argv, lines, 3, False, 120) == [
        "A: a.py has no attribute 'main'",
        "B: importing it ended the Python process (exit code 3)",
        "C: not checked: an earlier workflow's import ended the check",
    ]
    assert _problems(targets[:2], argv[:4], lines, None, True, 120)[1] == "B: importing it did not finish within 120s"


# -- the dry-run summary -------------------------------------------------------------------------
def test_the_dry_run_lists_jobs_that_fit_and_summarises_the_rest(tmp_path: Path) -> None:
    text = jobs_text({"a": list(range(30)), "b": list(range(4))})
    jf = parse_jobs_text(text, path=tmp_path / "jobs.toml")
    plan = plan_resume(jf.jobs, "sha256:x", {})
    assert len(plan_lines(plan, jf.jobs, limit=120)) == 120
    summary = plan_lines(plan, jf.jobs, limit=40)
    assert len(summary) < 40
    assert summary[0] == "120 jobs (more than a screenful: summarised)"
    assert "axis a: 30 values (0, 1, 2, …) · 4 jobs each" in summary
    assert summary[-1].strip().startswith(f"run   {jf.jobs[-1].id}")


# -- attempts ------------------------------------------------------------------------------------
def _finished(jd, attempt: int, status: str = "passed"):  # noqa: ANN001, ANN202
    job = _job(jd.job)
    record = new_record(job, batch=jd.batch, image_id="sha256:x", attempt=attempt)
    from dataclasses import replace

    record = replace(record, status=status, finished_at="2026-01-01T00:00:00+00:00")
    jd.make()
    write_record(jd.record_path, record)
    (jd.workspace / "answer.txt").write_text(f"attempt {attempt}\n")
    (jd.runs / "manifest.json").write_text("[]")
    (jd.runs / "sessions.db").write_bytes(b"db")
    (jd.logs / "container.log").write_text("log\n")
    return record


def test_a_previous_attempt_moves_whole_to_attempts_n(tmp_path: Path) -> None:
    jd = Home(tmp_path).job("b", "j")
    previous = _finished(jd, 1)
    before = sorted(p.relative_to(jd.root).as_posix() for p in jd.root.rglob("*"))
    dest = keep_previous_attempt(jd, previous, 2)
    assert dest == jd.root / "attempts" / "1"
    after = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*"))
    assert after == before
    assert not jd.workspace.exists() and not jd.runs.exists()
    assert (dest / "workspace" / "answer.txt").read_text() == "attempt 1\n"
    # the next re-run keeps the second attempt beside the first
    second = _finished(jd, 2, "failed")
    keep_previous_attempt(jd, second, 3)
    assert attempt_numbers(jd) == [1, 2]
    assert [a.record.status for a in list_attempts(jd) if a.record] == ["passed", "failed"]
    assert prunable(jd, keep=1) == [jd.root / "attempts" / "1"]
    assert prunable(jd, keep=5) == []


def test_this_runs_queued_record_is_not_an_attempt(tmp_path: Path) -> None:
    jd = Home(tmp_path).job("b", "j")
    jd.root.mkdir(parents=True)
    write_record(jd.record_path, new_record(_job("j"), batch="b", image_id="sha256:x", attempt=1))
    assert keep_previous_attempt(jd, None, 1) is None
    assert not (jd.root / "attempts").exists()


def test_an_unfinished_attempt_is_kept_with_the_record_the_planner_read(tmp_path: Path) -> None:
    """The orchestrator died mid-job; this run replaced its record with a `queued` one."""
    jd = Home(tmp_path).job("b", "j")
    from dataclasses import replace

    running = replace(_finished(jd, 1), status="running", finished_at=None)
    write_record(jd.record_path, new_record(_job("j"), batch="b", image_id="sha256:x", attempt=2))
    dest = keep_previous_attempt(jd, running, 2)
    assert dest is not None
    assert json.loads((dest / "record.json").read_text())["status"] == "running"
    assert (dest / "runs" / "sessions.db").read_bytes() == b"db"


@pytest.mark.anyio
async def test_a_rerun_whose_setup_fails_keeps_the_previous_verdict_as_an_attempt(tmp_path: Path, monkeypatch) -> None:
    """No ANTHROPIC_API_KEY: the gateway cannot start, the job ends `error` — its earlier passed
    attempt (record, workspace, runs) is in attempts/1, not overwritten."""
    from flower_batch.backend.fake import FakeBackend
    from flower_batch.matrix import read_record
    from flower_batch.running.scheduler import run_jobs

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = Home(tmp_path / "home")
    jd = home.job("b", "j")
    old = _finished(jd, 1)
    async with FakeBackend() as backend:
        done = await run_jobs(backend, home, "b", [(_job("j"), old)], image_id="sha256:x", versions={}, parallel=1)
    assert done["j"].status == "error" and done["j"].attempt == 2
    kept = jd.root / "attempts" / "1"
    assert read_record(kept / "record.json").status == "passed"
    assert (kept / "workspace" / "answer.txt").read_text() == "attempt 1\n"


def test_a_misspelt_module_target_gets_a_did_you_mean(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text("x = 1\n")
    pf = Preflight(lambda f, v, jobs: f"{f} {v}")
    pf.add_jobs([_job(workflow="flow:main")], search=[tmp_path])
    (line,) = pf.problems
    assert line.startswith("workflow flow:main: module flow not found") and line.endswith("(did you mean flows?)")


@pytest.mark.parametrize("text", [
    '[tasks.alpha]\nprompt = "p"\n[[jobs]]\nname = "x"\ntask = ["alpha"]\n',
    '[tasks.alpha]\nprompt = "p"\n[[jobs]]\nname = "x"\ntask = { a = 1 }\n',
    '[tasks.alpha]\nprompt = "p"\n[matrix]\ntask = [["alpha"]]\n',
    '[tasks.alpha]\nprompt = "p"\n[matrix]\ntask = [{ name = "alpha" }]\n',
])
def test_a_task_given_as_a_list_or_table_is_one_line_not_a_type_error(tmp_path: Path, text: str) -> None:
    """Found by the fuzz: `task = ["alpha"]` raised TypeError (unhashable) out of the parser."""
    with pytest.raises(MatrixFileError) as caught:
        parse_jobs_text(text, path=tmp_path / "jobs.toml")
    assert all("\n" not in str(e) and "task" in str(e) for e in caught.value.errors)


@pytest.mark.parametrize("path", ["a\\u0000b", "x" * 300, "/".join(["y" * 250] * 20)])
def test_an_unusable_path_is_one_line_not_an_os_error(tmp_path: Path, path: str) -> None:
    """Found by the fuzz: a NUL byte or an over-long name raised ValueError/OSError out of the loader."""
    text = f'[tasks.alpha]\nprompt = "p"\nworkspace = "{path}"\ngateway = {{ mode = "scripted", scenario = "{path}" }}\n'
    with pytest.raises(MatrixFileError) as caught:
        parse_jobs_text(text, path=tmp_path / "jobs.toml")
    lines = [str(e) for e in caught.value.errors]
    assert len(lines) == 2 and all("\n" not in line and "write a plain relative path" in line for line in lines)


@pytest.mark.parametrize("target", ["a\x00b.py:main", ("z" * 300) + ".py:main", "pkg." + ("z" * 300) + ":main"])
def test_an_unusable_target_path_is_one_line(tmp_path: Path, target: str) -> None:
    pf = Preflight(lambda f, v, jobs: f"{f} X")
    pf.add_jobs([_job(workflow=target)], search=[tmp_path])
    (line,) = pf.problems
    assert line.startswith("workflow X: ") and "\n" not in line


def test_a_newline_inside_a_value_or_key_stays_inside_its_one_line(tmp_path: Path) -> None:
    """Found by the fuzz: a value echoed back with its newline made one problem two lines."""
    text = '[batch]\nbudget_usd = "a\\nb"\n[tasks.alpha]\nprompt = "p"\n"x\\ny" = 1\n'
    with pytest.raises(MatrixFileError) as caught:
        parse_jobs_text(text, path=tmp_path / "jobs.toml")
    lines = str(caught.value).splitlines()
    assert len(lines) == len(caught.value.errors) == 2
    assert '"a\\nb"' in lines[0] and '"x\\ny"' in lines[1]


@pytest.mark.anyio
async def test_ctrl_c_before_a_job_starts_leaves_its_old_attempt_where_it_was(tmp_path: Path) -> None:
    """Two re-runs, one at a time: stopped while the first runs, the second never started, so its
    earlier attempt is still the job folder itself (record, workspace, runs), not in attempts/."""
    import anyio

    from flower_batch.backend.fake import FakeBackend, Script
    from flower_batch.gateway.sidecar import READY_LINE
    from flower_batch.matrix import GatewaySpec, read_record
    from flower_batch.running.scheduler import run_jobs

    scenario = tmp_path / "s.toml"
    scenario.write_text('[[rules]]\nreply = "hi"\n')
    home = Home(tmp_path / "home")
    gateway = GatewaySpec(mode="scripted", scenario=scenario)
    first, second = _job("first", gateway=gateway), _job("second", gateway=gateway)
    old_first, old_second = _finished(home.job("b", "first"), 1), _finished(home.job("b", "second"), 1)
    programs = {"python": Script(duration_s=60, log_lines=[READY_LINE], term_exit_code=143),
                "flower": Script(duration_s=60, term_exit_code=143)}  # end at SIGTERM: no grace to wait out

    first_runs = anyio.Event()

    def on_state(job_id: str, state: str) -> None:
        if (job_id, state) == ("first", "running"):
            first_runs.set()

    async with FakeBackend(programs=programs, images={"sha256:x": {}}) as backend, anyio.create_task_group() as tg:
        tg.start_soon(lambda: run_jobs(backend, home, "b", [(first, old_first), (second, old_second)],
                                       image_id="sha256:x", versions={}, parallel=1, on_state=on_state))
        await first_runs.wait()
        await anyio.sleep(0.5)  # its container is up: this is Ctrl-C mid-job, the second still waiting
        tg.cancel_scope.cancel()
    assert attempt_numbers(home.job("b", "first")) == [1]  # it had started: kept in attempts/1
    jd = home.job("b", "second")
    assert attempt_numbers(jd) == []
    assert read_record(jd.record_path).status == "passed"
    assert (jd.workspace / "answer.txt").read_text() == "attempt 1\n"
    assert (jd.runs / "sessions.db").read_bytes() == b"db"


def test_gc_attempts_keeps_the_newest_n_and_dry_run_removes_nothing(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flower_batch.cli import app

    jd = Home(tmp_path / "home").job("b", "j")
    for n in (1, 2, 3):
        _finished(jd, n)
        keep_previous_attempt(jd, jd.record(), n + 1)
    _finished(jd, 4)
    run = CliRunner().invoke
    home = ["--home", str(tmp_path / "home")]
    assert run(app, ["gc", "--keep", "1", *home]).exit_code == 2  # --keep alone is no prune
    dry = run(app, ["gc", "--attempts", "--keep", "1", "--dry-run", *home])
    assert dry.exit_code == 0 and "would remove 2 earlier attempt(s)" in dry.output
    assert attempt_numbers(jd) == [1, 2, 3]
    done = run(app, ["gc", "--attempts", "--keep", "1", *home])
    assert done.exit_code == 0 and attempt_numbers(jd) == [3]
    assert jd.record().attempt == 4 and (jd.workspace / "answer.txt").read_text() == "attempt 4\n"
