"""jobs.toml parsing and expansion: layering, templating, ids, include/exclude."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flower_batch.errors import MatrixFileError
from flower_batch.jobmodel.spec import JobsFile
from flower_batch.jobsfile import combinations, load_jobs_file


def write_jobs(root: Path, text: str, dirs: tuple[str, ...] = ("tasks/a", "tasks/b")) -> Path:
    for d in dirs:
        (root / d).mkdir(parents=True, exist_ok=True)
        (root / d / "README.md").write_text(f"workspace {d}\n")
    path = root / "jobs.toml"
    path.write_text(textwrap.dedent(text))
    return path


def load(root: Path, text: str) -> JobsFile:
    return load_jobs_file(write_jobs(root, text))


TWO_TASKS = """
[defaults]
image = "flower-batch:latest"
workflow = "examples.workflows:${{ matrix.variant }}"
timeout = "10m"

[tasks.a]
workspace = "tasks/a"
prompt = "do a"
check = "test -f a.txt"

[tasks.b]
workspace = "tasks/b"
prompt = "do b"
"""


def test_minimal_file_gives_one_job_per_task_with_defaults(tmp_path):
    jobs = load(
        tmp_path,
        """
        [tasks.a]
        workspace = "tasks/a"
        prompt = "hello"
    """,
    )
    (job,) = jobs.jobs
    assert job.id == "a.r1"
    assert job.variant == "default"
    assert job.workflow is None and job.uses_starter_flow
    assert job.prompt == "hello"
    assert job.timeout_s == 1800.0 and job.check_timeout_s == 300.0
    assert job.gateway.mode == "anthropic"
    assert job.workspace == (tmp_path / "tasks/a").resolve()
    assert jobs.image is None and jobs.name == "jobs"


def test_two_variants_two_tasks_two_repeats(tmp_path):
    jobs = load(
        tmp_path,
        TWO_TASKS
        + """
        [matrix]
        variant = ["careful", "quick"]
        repeat = 2
    """,
    )
    assert [j.id for j in jobs.jobs] == [
        "a.careful.r1",
        "a.quick.r1",
        "b.careful.r1",
        "b.quick.r1",
        "a.careful.r2",
        "a.quick.r2",
        "b.careful.r2",
        "b.quick.r2",
    ]
    assert jobs.tasks == ("a", "b") and jobs.variants == ("careful", "quick")
    assert jobs.axes == ("task", "variant")
    quick = jobs.job("b.quick.r2")
    assert quick.workflow == "examples.workflows:quick"
    assert quick.matrix == {"task": "b", "variant": "quick"}
    assert quick.repeat == 2 and quick.timeout_s == 600.0
    assert quick.check is None and jobs.job("a.quick.r1").check == "test -f a.txt"


def test_precedence_defaults_task_axis_include(tmp_path):
    jobs = load(
        tmp_path,
        TWO_TASKS
        + """
        [tasks.a.env]
        LEVEL = "task"
        [matrix]
        variant = [
          { name = "careful", timeout = "20m", env = { LEVEL = "axis" } },
          { name = "quick" },
        ]
        include = [{ task = "b", variant = "quick", timeout = "1m", cpus = 2 }]
    """,
    )
    assert jobs.job("a.careful.r1").timeout_s == 1200  # axis beats defaults
    assert jobs.job("a.careful.r1").env == {"LEVEL": "axis"}  # axis beats task
    assert jobs.job("a.quick.r1").env == {"LEVEL": "task"}
    assert jobs.job("b.quick.r1").timeout_s == 60 and jobs.job("b.quick.r1").cpus == 2.0  # include beats axis
    assert jobs.job("b.careful.r1").timeout_s == 1200
    assert len(jobs.jobs) == 4  # the include extended a combination, it did not add one


def test_env_and_args_merge_and_secrets_accumulate(tmp_path):
    jobs = load(
        tmp_path,
        """
        [defaults]
        env = { A = "1", B = "2" }
        args = { rounds = 2, style = "plain" }
        secrets = ["GITHUB_TOKEN"]
        [tasks.a]
        workspace = "tasks/a"
        prompt = "p"
        env = { B = "task", C = 3 }
        args = { style = "${{ matrix.tone }}" }
        secrets = ["NPM_TOKEN", "GITHUB_TOKEN"]
        [matrix]
        tone = ["terse"]
    """,
    )
    (job,) = jobs.jobs
    assert job.env == {"A": "1", "B": "task", "C": "3"}
    assert job.args == {"rounds": 2, "style": "terse"}
    assert job.secrets == ("GITHUB_TOKEN", "NPM_TOKEN")
    assert jobs.secret_names == ("GITHUB_TOKEN", "NPM_TOKEN")
    assert job.environment({"GITHUB_TOKEN": "g", "NPM_TOKEN": "n", "OTHER": "o"}) == {
        "A": "1",
        "B": "task",
        "C": "3",
        "GITHUB_TOKEN": "g",
        "NPM_TOKEN": "n",
    }
    with pytest.raises(LookupError, match="job a.terse.r1: secret NPM_TOKEN not set in the environment"):
        job.environment({"GITHUB_TOKEN": "g"})
    assert jobs.missing_secrets({"GITHUB_TOKEN": "x"}) == [
        "jobs.toml: secret NPM_TOKEN is not set in the environment; export it before running"
    ]


def test_templating_references(tmp_path):
    jobs = load(
        tmp_path,
        """
        [tasks.a]
        workspace = "tasks/a"
        prompt = "task ${{ task.name }} as ${{ matrix.persona.name }} (${{matrix.persona.tone}}) run ${{ job.repeat }} id ${{ job.id }} t=${{ matrix.temperature }} v=${{ matrix.verbose }}"
        check = "grep -q ${{ matrix.persona }} out.txt"
        [matrix]
        persona = [{ name = "Ann", tone = "warm" }]
        temperature = [0.5]
        verbose = [false]
    """,
    )
    (job,) = jobs.jobs
    assert job.id == "a.ann.temperature-0-5.no-verbose.r1"
    assert job.prompt == f"task a as Ann (warm) run 1 id {job.id} t=0.5 v=false"
    assert job.check == "grep -q Ann out.txt"


def test_task_axis_can_be_declared_anywhere_and_restricts_tasks(tmp_path):
    jobs = load(
        tmp_path,
        TWO_TASKS
        + """
        [matrix]
        variant = ["careful", "quick"]
        task = ["b"]
    """,
    )
    assert [j.id for j in jobs.jobs] == ["b.careful.r1", "b.quick.r1"]
    assert jobs.tasks == ("b",)


def test_exclude_then_include_new_combination_with_named_table(tmp_path):
    jobs = load(
        tmp_path,
        TWO_TASKS
        + """
        [matrix]
        variant = [{ name = "careful", timeout = "20m" }, { name = "quick" }]
        exclude = [{ task = "a", variant = "careful" }]
        include = [{ task = "a", variant = "careful", prompt = "special" }]
    """,
    )
    # the excluded pair comes back through include, as a new combination that still gets
    # the full "careful" table (named by its `name`) and the include's own prompt
    readded = jobs.job("a.careful.r1")
    assert readded.prompt == "special" and readded.timeout_s == 1200
    assert readded.matrix["variant"] == {"name": "careful", "timeout": "20m"}
    assert [j.id for j in jobs.jobs] == ["a.quick.r1", "b.careful.r1", "b.quick.r1", "a.careful.r1"]


def test_include_without_axis_keys_extends_every_combination(tmp_path):
    jobs = load(
        tmp_path,
        TWO_TASKS
        + """
        [matrix]
        variant = ["careful", "quick"]
        include = [{ note = "all" }, { variant = "quick", note = "fast" }]
        [defaults.env]
        NOTE = "${{ matrix.note }}"
    """,
    )
    assert {j.id: j.env["NOTE"] for j in jobs.jobs} == {
        "a.careful.r1": "all",
        "a.quick.r1": "fast",
        "b.careful.r1": "all",
        "b.quick.r1": "fast",
    }


def test_include_new_combination_labels_and_explicit_jobs(tmp_path):
    jobs = load(
        tmp_path,
        TWO_TASKS
        + """
        [matrix]
        variant = ["careful", "quick"]
        include = [{ task = "a", variant = "experimental" }]
        repeat = 2

        [[jobs]]
        name = "Hand-Tuned"
        task = "b"
        workflow = "examples.workflows:tuned"
        prompt = "tuned ${{ matrix.level }}"
        matrix = { level = "high" }
        repeat = 1
    """,
    )
    ids = [j.id for j in jobs.jobs]
    assert "a.experimental.r1" in ids and "a.experimental.r2" in ids
    assert jobs.job("a.experimental.r2").workflow == "examples.workflows:experimental"
    tuned = jobs.job("b.hand-tuned.r1")
    assert (
        tuned.variant == "hand-tuned"
        and tuned.prompt == "tuned high"
        and tuned.workflow == "examples.workflows:tuned"
    )
    assert "b.hand-tuned.r2" not in ids
    assert jobs.variants == ("careful", "quick", "experimental", "hand-tuned")


def test_ids_are_stable_when_repeat_grows_and_values_are_reordered(tmp_path):
    base = TWO_TASKS + '[matrix]\nvariant = ["careful", "quick"]\n'
    one = {j.id: j.inputs_hash("img") for j in load(tmp_path, base).jobs}
    more = {
        j.id: j.inputs_hash("img")
        for j in load(
            tmp_path, base.replace('["careful", "quick"]', '["quick", "careful"]') + "repeat = 3\n"
        ).jobs
    }
    assert set(one) <= set(more)
    assert all(more[i] == h for i, h in one.items())  # same job, same inputs -> resume keeps it


def test_field_named_axis_sets_the_field_and_labels_long_values(tmp_path):
    long_prompt = "Please do the task very carefully, step by step, and explain everything."
    jobs = load(
        tmp_path,
        f"""
        [tasks.a]
        workspace = "tasks/a"
        prompt = "p"
        [matrix]
        model = ["claude-sonnet-4-5", "claude-haiku-4-5"]
        prompt = ["{long_prompt}"]
    """,
    )
    ids = [j.id for j in jobs.jobs]
    assert all(len(label) <= 40 for i in ids for label in i.split("."))
    assert ids[0].startswith("a.claude-sonnet-4-5.please-do-the-task")
    assert jobs.jobs[0].model == "claude-sonnet-4-5" and jobs.jobs[0].prompt == long_prompt


def test_gateway_paths_resolve_and_are_content_hashed(tmp_path):
    (tmp_path / "scen").mkdir()
    (tmp_path / "scen" / "demo.json").write_text("{}")
    jobs = load(
        tmp_path,
        """
        [defaults]
        gateway = { mode = "scripted", scenario = "scen/demo.json" }
        [tasks.a]
        workspace = "tasks/a"
        prompt = "p"
    """,
    )
    gateway = jobs.jobs[0].gateway
    assert gateway.mode == "scripted" and gateway.label == "scripted model"
    assert gateway.scenario == (tmp_path / "scen/demo.json").resolve()
    assert gateway.scenario_hash and gateway.scenario_hash.startswith("sha256:")
    assert jobs.gateway_modes == ("scripted",)


def test_to_dict_round_trip(tmp_path):
    jobs = load(
        tmp_path, TWO_TASKS + '[matrix]\nvariant = [{ name = "careful", cpus = 1.5, memory = "1g" }]\n'
    )
    from flower_batch.jobmodel.spec import JobSpec

    for job in jobs.jobs:
        assert JobSpec.from_dict(job.to_dict()) == job


def test_github_docs_include_example():
    # https://docs.github.com/actions: "Example: Expanding configurations"
    rows = combinations(
        {"fruit": ["apple", "pear"], "animal": ["cat", "dog"]},
        include=[
            {"color": "green"},
            {"color": "pink", "animal": "cat"},
            {"fruit": "apple", "shape": "circle"},
            {"fruit": "banana"},
            {"fruit": "banana", "animal": "cat"},
        ],
    )
    assert [r.values for r in rows] == [
        {"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"},
        {"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"},
        {"fruit": "pear", "animal": "cat", "color": "pink"},
        {"fruit": "pear", "animal": "dog", "color": "green"},
        {"fruit": "banana"},
        {"fruit": "banana", "animal": "cat"},
    ]
    assert [r.include_index for r in rows] == [None, None, None, None, 3, 4]


def test_github_docs_exclude_example():
    rows = combinations(
        {"os": ["macos", "windows"], "version": [12, 14, 16], "environment": ["staging", "production"]},
        exclude=[
            {"os": "macos", "version": 12, "environment": "production"},
            {"os": "windows", "version": 16},
        ],
    )
    assert len(rows) == 9
    assert {"os": "macos", "version": 12, "environment": "production"} not in [r.values for r in rows]
    assert not any(r.values["os"] == "windows" and r.values["version"] == 16 for r in rows)


def test_github_include_never_overwrites_original_values():
    rows = combinations(
        {"os": ["windows", "ubuntu"], "node": [14, 16]},
        include=[{"os": "windows", "node": 16, "npm": 6}, {"os": "windows", "version": 17}],
    )
    assert [r.values for r in rows] == [
        {"os": "windows", "node": 14, "version": 17},
        {"os": "windows", "node": 16, "npm": 6, "version": 17},
        {"os": "ubuntu", "node": 14},
        {"os": "ubuntu", "node": 16},
    ]
    added = combinations({"os": ["a", "b"]}, include=[{"os": "c", "x": 1}])
    assert [r.values for r in added] == [{"os": "a"}, {"os": "b"}, {"os": "c", "x": 1}]


def test_include_only_matrix_without_axes():
    rows = combinations({}, include=[{"a": 1}, {"a": 2}])
    assert [r.values for r in rows] == [{"a": 1}, {"a": 2}]


def test_everything_excluded_is_an_error(tmp_path):
    with pytest.raises(MatrixFileError) as info:
        load(tmp_path, TWO_TASKS + '[matrix]\nvariant = ["x"]\nexclude = [{ variant = "x" }]\n')
    assert [str(e) for e in info.value.errors] == [
        f"{tmp_path / 'jobs.toml'}:15: matrix: expands to no jobs (every combination is excluded); "
        "remove an exclude entry or add [[jobs]]"
    ]
