"""Invalid jobs.toml files: each problem is one precise line `file:line: field: fix`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flower_batch.errors import MatrixFileError
from flower_batch.jobsfile import load_jobs_file, parse_jobs_text

HEAD = """\
[tasks.a]
workspace = "tasks/a"
prompt = "do a"
"""


def errors_of(root: Path, text: str) -> list[str]:
    (root / "tasks/a").mkdir(parents=True, exist_ok=True)
    with pytest.raises(MatrixFileError) as info:
        parse_jobs_text(textwrap.dedent(text), path=root / "jobs.toml", label="jobs.toml")
    return [str(e) for e in info.value.errors]


CASES = {
    "bad duration": (
        HEAD + 'timeout = "ten"\n',
        'jobs.toml:4: tasks.a.timeout: expected a duration like "10m", "1h30m" or seconds, got "ten"',
    ),
    "typo in a field": (
        HEAD + 'chek = "true"\n',
        "jobs.toml:4: tasks.a.chek: unknown field; did you mean `check`?",
    ),
    "image and build": (
        HEAD + 'image = "other:1"\nbuild = "tasks/a"\n',
        "jobs.toml:5: tasks.a.build: set `image` or `build`, not both: a task runs in one image",
    ),
    "build folder without a Dockerfile": (
        HEAD + 'build = "tasks/a"\n',
        'jobs.toml:4: tasks.a.build: build folder "tasks/a" has no Dockerfile (looked for {root}/tasks/a/Dockerfile)',
    ),
    "build folder missing": (
        HEAD + 'build = "envs/none"\n',
        'jobs.toml:4: tasks.a.build: build folder "envs/none" not found (looked for {root}/envs/none); '
        "paths are relative to the jobs file",
    ),
    "build key unknown": (
        HEAD + 'build = { dir = "tasks/a", context = "." }\n',
        "jobs.toml:4: tasks.a.build.context: unknown build key; use dir, dockerfile, args",
    ),
    "task text key": (
        '[defaults]\ntask = "fix the bug"\n' + HEAD,
        'jobs.toml:2: defaults.task: the starter flow takes `prompt` as its task text; write prompt = "..." and leave out `workflow`',
    ),
    "secret value in env": (
        '[defaults]\nenv = { GITHUB_TOKEN = "ghp_abc123" }\n' + HEAD,
        'jobs.toml:2: defaults.env.GITHUB_TOKEN: looks like a secret written into the file; delete it and add "GITHUB_TOKEN" to `secrets` so its value is taken from the host environment by name',
    ),
    "gateway key as secret": (
        '[defaults]\nsecrets = ["ANTHROPIC_API_KEY"]\n' + HEAD,
        "jobs.toml:2: defaults.secrets[0]: ANTHROPIC_API_KEY is never passed to a job: the gateway holds the real key; remove it",
    ),
    "secret value instead of name": (
        '[defaults]\nsecrets = [\n  "GITHUB_TOKEN",\n  "sk-ant-123",\n]\n' + HEAD,
        'jobs.toml:4: defaults.secrets[1]: expected the NAME of a host environment variable (not its value), got "sk-ant-123"',
    ),
    "exclude not a list": (
        HEAD + 'exclude = "data/"\n',
        'jobs.toml:4: tasks.a.exclude: expected a list of path patterns like ["data/", "*.bin"], got "data/"',
    ),
    "bad workspace limit": (
        HEAD + 'workspace_limit = "huge"\n',
        'jobs.toml:4: tasks.a.workspace_limit: expected a size like "500m" or "2g", or "none" for no size limit, got "huge"',
    ),
    "missing workspace": (
        '[tasks.a]\nworkspace = "tasks/zz"\nprompt = "p"\n',
        'jobs.toml:2: tasks.a.workspace: directory "tasks/zz" not found (looked for {root}/tasks/zz); paths are relative to the jobs file',
    ),
    "unknown task on the task axis": (
        HEAD + '[matrix]\ntask = ["a", "b"]\n',
        'jobs.toml:5: matrix.task[1]: unknown task "b"; define [tasks.b] or use one of: a',
    ),
    "exclude on a non-axis": (
        HEAD + '[matrix]\nv = ["x", "y"]\nexclude = [{ w = "x" }]\n',
        "jobs.toml:6: matrix.exclude[0].w: not an axis; exclude entries match axis values (axes: task, v)",
    ),
    "include creates a combination without task": (
        HEAD + '[matrix]\nv = ["x"]\ninclude = [\n  { v = "y" },\n]\n',
        'jobs.toml:7: matrix.include[0]: adds a new combination without `task`; add task = "NAME" (or make it match an existing combination)',
    ),
    "two values with the same label": (
        HEAD + '[matrix]\nmodel = ["Claude Sonnet", "claude-sonnet"]\n',
        'jobs.toml:5: matrix.model[1]: has the same id label "claude-sonnet" as model[0]; make each value distinct (tables: give each a distinct `name`)',
    ),
    "undefined template reference": (
        '[tasks.a]\nworkspace = "tasks/a"\nprompt = "be ${{ matrix.style }}"\n[matrix]\nv = ["x"]\n',
        "jobs.toml:3: tasks.a.prompt: `${{ matrix.style }}` is not defined for job a.x.r1 (its matrix values: task, v); add a `style` axis or an include entry that sets it",
    ),
    "unclosed template": (
        '[tasks.a]\nworkspace = "tasks/a"\nprompt = "be ${{ matrix.style"\n',
        "jobs.toml:3: tasks.a.prompt: unclosed `${{`; close it with `}}`",
    ),
    "scripted gateway without scenario": (
        '[defaults]\ngateway.mode = "scripted"\n' + HEAD,
        'jobs.toml:2: defaults.gateway.mode: scripted mode needs a scenario file: add scenario = "path/to/scenario" to the gateway table',
    ),
    "unknown gateway mode": (
        '[defaults]\ngateway = { mode = "openai" }\n' + HEAD,
        'jobs.toml:2: defaults.gateway.mode: unknown gateway mode "openai"; use one of anthropic, scripted, replay',
    ),
    "missing scenario file": (
        '[defaults]\ngateway = { mode = "scripted", scenario = "s.json" }\n' + HEAD,
        'jobs.toml:2: defaults.gateway.scenario: "s.json" not found (looked for {root}/s.json); paths are relative to the jobs file',
    ),
    "pids too few": (
        HEAD + "pids = 10\n",
        "jobs.toml:4: tasks.a.pids: expected a whole number of processes of at least 64, like 4096, got 10",
    ),
    "network unknown": (
        HEAD + 'network = "host"\n',
        'jobs.toml:4: tasks.a.network: expected "gateway" (the model only: the default) or "internet" '
        '(also a route out), got "host"',
    ),
    "memory below docker minimum": (
        HEAD + 'memory = "1m"\n',
        'jobs.toml:4: tasks.a.memory: "1m" is below Docker\'s minimum of 6m; give the job at least "6m"',
    ),
    "cpus as text": (
        HEAD + 'cpus = "two"\n',
        'jobs.toml:4: tasks.a.cpus: expected a positive number of CPUs like 1 or 0.5, got "two"',
    ),
    "explicit job without name": (
        HEAD + '[[jobs]]\ntask = "a"\n',
        "jobs.toml:4: jobs[0]: every [[jobs]] entry needs a `name` (letters, digits, - and _); it becomes part of the job id",
    ),
    "explicit job id clashes with the matrix": (
        HEAD + '[matrix]\nv = ["x"]\n[[jobs]]\nname = "x"\ntask = "a"\n',
        'jobs.toml:7: jobs[0].name: produces job id "a.x.r1" a second time; give it a distinct value, `name` or [[jobs]] name',
    ),
    "repeat not a number": (
        HEAD + '[matrix]\nrepeat = "3"\n',
        'jobs.toml:5: matrix.repeat: expected a whole number of runs per combination from 1 to 1000, got "3"',
    ),
    "typo inside an axis table": (
        HEAD + '[matrix]\nv = [\n  { name = "a", workfow = "m:f" },\n]\n',
        "jobs.toml:6: matrix.v[0].workfow: not a job field (did you mean `workflow`?); fix the spelling, or rename it if it is a variable",
    ),
    "workflow target shape": (
        HEAD + 'workflow = "examples/workflows.py"\n',
        'jobs.toml:4: tasks.a.workflow: expected a workflow target "module:attr" like "examples.workflows:careful", got "examples/workflows.py"',
    ),
    "empty axis": (
        HEAD + "[matrix]\nmodel = []\n",
        'jobs.toml:5: matrix.model: an axis is a non-empty list of values, e.g. model = ["a", "b"]; got an empty list',
    ),
    "unknown section": (
        HEAD + "[defaultz]\nimage = 'x'\n",
        "jobs.toml:4: defaultz: unknown section; did you mean `defaults`?",
    ),
    "no tasks": (
        '[defaults]\nimage = "x"\n',
        "jobs.toml: tasks: no tasks defined; add a [tasks.NAME] table with a prompt and a workspace "
        '(or a [tasksets.NAME] with harbor = "path")',
    ),
    "starter flow without prompt": (
        '[tasks.a]\nworkspace = "tasks/a"\n',
        'jobs.toml:1: tasks.a: has no prompt; the starter flow (used when no `workflow` is set) needs prompt = "..."',
    ),
    "env value not a string": (
        HEAD + "env = { DEBUG = true }\n",
        'jobs.toml:4: tasks.a.env.DEBUG: expected a string value (write it in quotes, e.g. "true"), got true',
    ),
}


@pytest.mark.parametrize("text, expected", list(CASES.values()), ids=list(CASES))
def test_one_precise_error_per_bad_file(tmp_path, text, expected):
    assert errors_of(tmp_path, text) == [expected.replace("{root}", str(tmp_path))]


def test_invalid_toml_names_the_line(tmp_path):
    (error,) = errors_of(tmp_path, HEAD + 'timeout = "10m\n')
    assert error.startswith("jobs.toml:4: not valid TOML: ")


def test_all_errors_are_collected_in_file_order(tmp_path):
    errors = errors_of(
        tmp_path,
        """\
        [defaults]
        timeout = "soon"
        cpus = 0

        [tasks.a]
        workspace = "tasks/a"
        prompt = "p ${{ matrix.nope }}"
        memory = "huge"

        [matrix]
        v = ["x", "x"]
        repeat = 0
    """,
    )
    assert [e.split(": ")[0:2] for e in errors] == [
        ["jobs.toml:2", "defaults.timeout"],
        ["jobs.toml:3", "defaults.cpus"],
        ["jobs.toml:7", "tasks.a.prompt"],
        ["jobs.toml:8", "tasks.a.memory"],
        ["jobs.toml:11", "matrix.v[1]"],
        ["jobs.toml:12", "matrix.repeat"],
    ]


def test_same_problem_in_many_jobs_is_reported_once(tmp_path):
    errors = errors_of(
        tmp_path,
        """\
        [defaults]
        workflow = "nope"
        [tasks.a]
        workspace = "tasks/a"
        prompt = "p"
        [matrix]
        v = ["x", "y", "z"]
        repeat = 5
    """,
    )
    assert len(errors) == 1 and errors[0].startswith("jobs.toml:2: defaults.workflow:")


def test_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(MatrixFileError) as info:
        load_jobs_file(tmp_path / "missing.toml")
    assert (
        str(info.value)
        == f"{tmp_path / 'missing.toml'}: cannot read the jobs file: No such file or directory"
    )


@pytest.mark.parametrize(
    "text",
    [
        '[tasks.alpha]\nprompt = "p"\n[[jobs]]\nname = "x"\ntask = ["alpha"]\n',
        '[tasks.alpha]\nprompt = "p"\n[[jobs]]\nname = "x"\ntask = { a = 1 }\n',
        '[tasks.alpha]\nprompt = "p"\n[matrix]\ntask = [["alpha"]]\n',
        '[tasks.alpha]\nprompt = "p"\n[matrix]\ntask = [{ name = "alpha" }]\n',
    ],
)
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
    assert len(lines) == 2 and all(
        "\n" not in line and "write a plain relative path" in line for line in lines
    )


def test_a_newline_inside_a_value_or_key_stays_inside_its_one_line(tmp_path: Path) -> None:
    """Found by the fuzz: a value echoed back with its newline made one problem two lines."""
    text = '[batch]\nbudget_usd = "a\\nb"\n[tasks.alpha]\nprompt = "p"\n"x\\ny" = 1\n'
    with pytest.raises(MatrixFileError) as caught:
        parse_jobs_text(text, path=tmp_path / "jobs.toml")
    lines = str(caught.value).splitlines()
    assert len(lines) == len(caught.value.errors) == 2
    assert '"a\\nb"' in lines[0] and '"x\\ny"' in lines[1]


def test_pids_and_network_reach_the_job(tmp_path: Path) -> None:
    (tmp_path / "tasks/a").mkdir(parents=True)
    jobs = parse_jobs_text(
        HEAD + 'pids = 4096\nnetwork = "internet"\n', path=tmp_path / "jobs.toml", label="jobs.toml"
    ).jobs
    assert (jobs[0].pids, jobs[0].network) == (4096, "internet")
    assert jobs[0].to_dict()["network"] == "internet"
    plain = parse_jobs_text(HEAD, path=tmp_path / "jobs.toml", label="jobs.toml").jobs[0]
    assert (plain.pids, plain.network) == (None, "gateway") and "network" not in plain.to_dict()


def test_exclude_and_workspace_limit_reach_the_job_and_its_workspace_hash(tmp_path: Path) -> None:
    (tmp_path / "tasks/a").mkdir(parents=True)
    (tmp_path / "tasks/a/keep.py").write_text("x\n")
    plain = parse_jobs_text(HEAD, path=tmp_path / "jobs.toml").jobs[0]
    (tmp_path / "tasks/a/model.bin").write_bytes(b"0")
    text = HEAD + 'exclude = ["*.bin"]\nworkspace_limit = "1g"\n'
    job = parse_jobs_text(text, path=tmp_path / "jobs.toml").jobs[0]
    assert job.exclude == ("*.bin",) and job.workspace_limit == 1 << 30
    assert job.workspace_hash == plain.workspace_hash  # what is left out changes nothing
    assert parse_jobs_text(HEAD, path=tmp_path / "jobs.toml").jobs[0].workspace_hash != plain.workspace_hash
