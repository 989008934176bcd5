"""Every task in its own environment: jobs in images flower-batch did not build (Debian 11 with no
Python, Debian 13 with Python 3.13, a Dockerfile folder that installs a package with apt), flower
brought in read-only from the runtime bundle, with the scripted model. The agent's Bash tool says
which python3 and PATH it sees; the check uses a tool only that image has; wake continues the same
session in the same image; repro replays at $0 and refuses once the image is rebuilt with a change;
a matrix over three images resumes after kill -9 and exports. Bad environments are one line each,
before anything is written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from flower_batch.layout import Home
from tests.batch_fixtures.rig import (
    Job,
    fb,
    fb_start,
    leftovers,
    one_line_error,
    runtime_image,
    sigkill_group,
    wait_for,
)
from tests.batch_fixtures.task_images import DEBIAN11, DEBIAN13, MUSL, NO_SHELL, ensure
from tests.flower_batch.export.harbor_check import validate

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FLOWS = """
from flower import AgentSpec, Step, Workflow

WORKER = AgentSpec("worker", instructions="ROLE: worker.", allowed_tools=["Bash"],
                   permission_mode="bypassPermissions", max_turns=6)


def where() -> Workflow:
    return Workflow([Step("look", WORKER, "Say where you are.")], name="where")
"""
# The agent's Bash: the image's own python3 (or none), PATH, and no PYTHONPATH/LD_LIBRARY_PATH of flower's.
LOOK = (
    "{ python3 --version 2>/dev/null || echo 'python3: not found'; } > where.txt; "
    'echo "PATH=$PATH" >> where.txt; '
    'echo "PYTHONPATH=${PYTHONPATH:-unset} LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-unset}" >> where.txt; '
    'echo "uid=$(id -u) home=$HOME pwd=$(pwd)" >> where.txt; touch "$HOME/writable" && echo "home writable" >> where.txt; '
    "echo looked"
)
SCENARIO = f"""
description = "task images: the agent's Bash says which python3 and PATH it sees"
[defaults]
usage = {{ input_tokens = 1000, output_tokens = 100 }}
[[rules]]
name = "look"
last_is_tool_result = false
reply = [{{ tool_use = {{ name = "Bash", input = {{ command = {json.dumps(LOOK)} }} }} }}]
[[rules]]
name = "done"
last_is_tool_result = true
reply = "Done."
"""
APT_DOCKERFILE = f"""FROM {DEBIAN11}
RUN apt-get -o Acquire::Retries=5 update -qq \\
 && apt-get -o Acquire::Retries=5 install -y -qq --no-install-recommends bc >/dev/null \\
 && rm -rf /var/lib/apt/lists/*
"""
DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CHECK_13 = (
    "python3 -c 'import sys; assert sys.version_info[:2] == (3, 13)' && grep -q 'Python 3.13' where.txt"
)
CHECK_11 = "test \"$(echo 6*7 | bc)\" = 42 && grep -q 'python3: not found' where.txt"
JOBS = f"""
[batch]
name = "envs"

[defaults]
workspace = "ws"
gateway = {{ mode = "scripted", scenario = "scenario.toml" }}
check = "test -s where.txt"

[tasks.runtime]
prompt = "where"

[tasks.old]
prompt = "where"
build = "envs/d11"
check = {json.dumps(CHECK_11)}

[tasks.new]
prompt = "where"
image = "{DEBIAN13}"
check = {json.dumps(CHECK_13)}

[matrix]
variant = [{{ name = "a", workflow = "flows:where" }}, {{ name = "b", workflow = "flows:where", args = {{ v = "b" }} }}]
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tag in (DEBIAN11, DEBIAN13):
        ensure(tag)
    root = tmp_path_factory.mktemp("envs")
    (root / "ws").mkdir()
    (root / "ws" / "TASK.md").write_text("Say where you are.\n")
    (root / "flows.py").write_text(FLOWS)
    (root / "scenario.toml").write_text(SCENARIO)
    (root / "envs" / "d11").mkdir(parents=True)
    (root / "envs" / "d11" / "Dockerfile").write_text(APT_DOCKERFILE)
    (root / "jobs.toml").write_text(JOBS)
    return root


def run_in(project: Path, home: Path, *where: str, name: str, check: str, persistent: bool = False):
    return fb(
        "run", project / "ws", "-f", f"{project / 'flows.py'}:where", *where, "--scenario",
        project / "scenario.toml", "--name", name, *(["--persistent"] if persistent else []),
        home=home, timeout=600, cwd=project,
    )  # fmt: skip


# An image whose default user is root, with another WORKDIR and a HOME that does not exist: the job
# still runs as the sandbox uid, in /workspace, with a writable HOME.
ODD_USER = f"FROM {DEBIAN13}\nUSER root\nWORKDIR /srv/odd\nENV HOME=/nonexistent\n"


@pytest.mark.parametrize(
    ("where", "python", "tag"),
    [
        (("--image", DEBIAN13), "Python 3.13", DEBIAN13),
        (("--build", "envs/d11"), "python3: not found", None),
        (("--build", "envs/odd-user"), "Python 3.13", None),
        ((), "Python 3.11", None),  # the runtime image: its own python3, not flower's venv
    ],
    ids=["debian13-image", "debian11-build", "root-user-odd-home", "runtime-image"],
)
def test_the_agent_sees_the_images_own_python_and_path(project, tmp_path, where, python, tag):
    (project / "envs" / "odd-user").mkdir(exist_ok=True)
    (project / "envs" / "odd-user" / "Dockerfile").write_text(ODD_USER)
    home = tmp_path / "home"
    in_runtime = not where
    ran = run_in(project, home, *(where or ("--image", runtime_image())), name="look", check="")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    job = Job(home, "adhoc", "look")
    seen = (job.root / "workspace" / "where.txt").read_text().splitlines()
    uid = 10001 if os.getuid() == 0 else os.getuid()
    assert seen[0].startswith(python), seen
    assert seen[1:] == [
        DEFAULT_PATH,
        "PYTHONPATH=unset LD_LIBRARY_PATH=unset",
        f"uid={uid} home=/tmp pwd=/workspace",
        "home writable",
    ]
    if in_runtime:
        assert "task_image" not in job.record()["spec"]
        assert "task image" not in fb("show", "look", home=home).stdout
        return
    pinned = job.record()["spec"]["task_image"]
    if tag:
        assert pinned["id"] == ensure(tag) and pinned["ref"] == tag and pinned["origin"] == "image"
    else:
        assert pinned["origin"] == "build" and pinned["ref"].endswith(where[1])
    shown = fb("show", "look", home=home)
    assert f"task image  {pinned['ref'] if tag else 'build'}" in shown.stdout
    assert pinned["id"][:19] in shown.stdout


def test_wake_continues_the_same_session_in_the_same_image(project, tmp_path):
    home = tmp_path / "home"
    assert run_in(project, home, "--image", DEBIAN13, name="p", check="", persistent=True).returncode == 0
    first = Job(home, "adhoc", "p").record()
    woke = fb("wake", "p", home=home, timeout=300)
    assert woke.returncode == 0, woke.stdout + woke.stderr
    assert f"on image {DEBIAN13}" in woke.stderr
    after = Job(home, "adhoc", "p")
    assert after.record()["spec"]["task_image"] == first["spec"]["task_image"]
    assert after.record()["attempt"] == 2
    sessions = {row["session_id"] for row in after.manifest()}
    assert len(sessions) == 1, after.manifest()  # the same conversation, continued


def test_repro_replays_at_no_cost_and_refuses_a_rebuilt_image(project, tmp_path):
    home = tmp_path / "home"
    folder = tmp_path / "d11"
    folder.mkdir()
    (folder / "Dockerfile").write_text(APT_DOCKERFILE)
    assert run_in(project, home, "--build", folder, name="r", check="").returncode == 0
    again = fb("repro", "r", home=home, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    report = json.loads(next((home / "repro").glob("*/repro.json")).read_text())
    repro_job = next(p.name for p in (home / "repro").iterdir() if p.is_dir())
    record = Job(home, "repro", repro_job).record()
    assert record["spec"]["task_image"]["id"] == Job(home, "adhoc", "r").record()["spec"]["task_image"]["id"]
    assert record["gateway_mode"] == "replay" and not report["drift"]
    # The folder changes: the image it would build is another one, so the replay is refused.
    (folder / "Dockerfile").write_text(APT_DOCKERFILE + "ENV CHANGED=1\n")
    refused = fb("repro", "r", "--name", "again", home=home, timeout=300)
    one_line_error(refused, "build folder", "changed", "--allow-drift")
    assert not (home / "repro" / "again").exists()


def test_a_matrix_over_three_images_resumes_after_kill_9_and_exports(project, tmp_path):
    home = tmp_path / "home"
    runtime_image()
    first = fb_start(
        "matrix", project / "jobs.toml", "-j", "2", home=home, cwd=project, log=tmp_path / "m1.log"
    )
    passed = lambda: [j for j in Home(home).jobs("envs") if (j.root / "record.json").exists()  # noqa: E731
                      and Job(home, "envs", j.job).status() == "passed"]  # fmt: skip
    wait_for("a job of the matrix to pass", passed, timeout=600)
    sigkill_group(first)
    second = fb("matrix", project / "jobs.toml", "-j", "3", home=home, cwd=project, timeout=600)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "kept" in second.stderr
    records = {jd.job: jd.record() for jd in Home(home).jobs("envs")}
    assert len(records) == 6 and {r.status.value for r in records.values()} == {"passed"}
    images = {
        r.spec.task: (r.spec.task_image.origin if r.spec.task_image else None) for r in records.values()
    }
    assert images == {"runtime": None, "old": "build", "new": "image"}
    left = leftovers(home, "envs")
    assert not left, left.describe()
    html = (home / "envs" / "report" / "report.html").read_text()
    assert f"in {DEBIAN13}" in html and "in build " in html
    results = json.loads((home / "envs" / "report" / "results.json").read_text())
    assert {j["task"]: bool(j["task_image"]) for j in results["jobs"]} == {
        "runtime": False,
        "old": True,
        "new": True,
    }
    # ATIF that harbor's validator accepts, Inspect logs that inspect_ai reads back
    paths = [jd.root / "trajectory.json" for jd in Home(home).jobs("envs")]
    assert validate(paths) == {str(p): [] for p in paths}
    from inspect_ai.log import read_eval_log  # here: importing it costs every worker ~4 s of CPU

    out = fb("export", "envs", "--format", "inspect", "--out", tmp_path / "logs", home=home)
    assert out.returncode == 0, out.stderr
    samples = [s for p in (tmp_path / "logs").glob("*.json") for s in read_eval_log(str(p)).samples]
    assert {s.metadata.get("task_image", {}).get("ref") for s in samples} >= {DEBIAN13}


JOBS_BAD = """
[defaults]
workspace = "ws"
gateway = {{ mode = "scripted", scenario = "scenario.toml" }}
[tasks.t]
prompt = "where"
{env}
"""


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ('build = "fails"', ["task t", "the build of", "failed at step", "exit 7", "log:"]),
        ('image = "flower-batch-no-such:image"', ["task t", "not in the Docker engine"]),
        (f'image = "{MUSL}"', ["task t", "no glibc", "musl"]),
        (f'image = "{NO_SHELL}"', ["task t", "no /bin/sh"]),
        ('build = "empty"', ["tasks.t.build", "has no Dockerfile"]),
        (f'image = "{DEBIAN13}"\nbuild = "envs/d11"', ["tasks.t.build", "not both"]),
    ],
    ids=["build-fails", "no-such-image", "musl", "no-shell", "no-dockerfile", "image-and-build"],
)
def test_a_bad_environment_is_one_line_and_nothing_is_written(project, tmp_path, env, words):
    for tag in (MUSL, NO_SHELL):
        ensure(tag)
    (project / "fails").mkdir(exist_ok=True)
    (project / "fails" / "Dockerfile").write_text(f"FROM {DEBIAN11}\nRUN echo one\nRUN sh -c 'exit 7'\n")
    (project / "empty").mkdir(exist_ok=True)
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS_BAD.format(env=env).replace('"fails"', f'"{project / "fails"}"')
                    .replace('"empty"', f'"{project / "empty"}"').replace('"envs/d11"', f'"{project / "envs/d11"}"')
                    .replace('"ws"', f'"{project / "ws"}"').replace('"scenario.toml"', f'"{project / "scenario.toml"}"'))  # fmt: skip
    home = tmp_path / "home"
    line = _one_line(fb("matrix", jobs, home=home, timeout=600), *words)
    batch = home / "jobs"
    assert not batch.exists(), f"{line}: wrote {sorted(p.name for p in batch.iterdir())}"
    if "log:" in words:  # the failed build's whole log is kept
        log = Path(line.rsplit("log: ", 1)[1].rstrip(")"))
        assert "exit 7" in log.read_text() or "returned a non-zero code: 7" in log.read_text()


def test_the_probe_is_remembered_and_flower_is_copied_once(project, tmp_path):
    """Nothing is installed per job: the bundle's volume is made once per runtime build, and an
    image's probe is remembered, so the second job in a new image pays only its container."""
    home = tmp_path / "home"
    first = run_in(project, home, "--image", DEBIAN13, name="one", check="")
    assert first.returncode == 0, first.stdout + first.stderr
    probed = json.loads((home / ".cache" / "probed.json").read_text())
    assert any(key.startswith(ensure(DEBIAN13)) for key in probed)
    second = run_in(project, home, "--image", DEBIAN13, name="two", check="")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "copying the flower runtime" not in second.stderr


def _one_line(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    """Exit 2 and one line (a jobs file's own error starts with the file's name, not the tool's)."""
    if "tasks.t.build" not in words:
        return one_line_error(proc, *words)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert all(word in lines[0] for word in words), lines[0]
    return lines[0]


def test_gc_removes_a_batchs_built_images_only_when_asked(project, tmp_path):
    home = tmp_path / "home"
    folder = tmp_path / "own"
    folder.mkdir()
    (folder / "Dockerfile").write_text(f"FROM {DEBIAN13}\nLABEL only.this.test={tmp_path.name}\n")
    assert run_in(project, home, "--build", folder, name="g", check="").returncode == 0
    pinned = Job(home, "adhoc", "g").record()["spec"]["task_image"]["id"]
    assert fb("gc", home=home).returncode == 0  # plain gc: leaked containers only
    assert subprocess.run(["docker", "image", "inspect", pinned], capture_output=True).returncode == 0
    gone = fb("gc", "--images", "--batch", "adhoc", home=home)
    assert gone.returncode == 0 and "removed image flower-batch-task:" in gone.stdout, gone.stderr
    assert subprocess.run(["docker", "image", "inspect", pinned], capture_output=True).returncode != 0
    refused = fb("repro", "g", home=home, timeout=300)  # the image it ran in is gone: one line
    one_line_error(refused, "no longer in the Docker engine")
