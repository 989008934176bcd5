"""The Swarm backend's pure parts, with no cluster: reading task states, choosing the backend,
`placement` in jobs.toml, secret files, the storage probe's markers and the push reference."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from flower_batch.backend.registry_push import push_reference, repo_digest_for
from flower_batch.backend.select import backend_name
from flower_batch.backend.swarm_storage import Probe
from flower_batch.backend.swarm_tasks import ever_ran, newest_task, on_its_node, task_error, task_state
from flower_batch.errors import BackendChoiceError, RegistryError
from flower_batch.gateway.tokens import secrets_from_files
from flower_batch.matrix import MatrixFileError, load_jobs_file


def task(state: str, exit_code: int | None = None, container: bool = True, err: str = "", at: str = "1") -> dict:
    status: dict = {"State": state, "Err": err}
    if exit_code is not None or container:
        status["ContainerStatus"] = {"ContainerID": "c1" if container else "", "ExitCode": exit_code or 0}
    return {"Status": status, "CreatedAt": at}


def test_task_states_read_like_container_states() -> None:
    assert task_state(None) == ("created", None)
    assert task_state(task("pending", container=False)) == ("created", None)
    assert task_state(task("running")) == ("running", None)
    assert task_state(task("complete", 0)) == ("exited", 0)
    assert task_state(task("failed", 3)) == ("exited", 3)
    assert task_state(task("shutdown", 143)) == ("exited", 143)
    # rejected: never a normal end, and with no container it never ran
    assert task_state(task("rejected", 0)) == ("dead", None)
    rejected = task("rejected", container=False, err="assigned node no longer meets constraints")
    assert task_state(rejected) == ("dead", None) and not ever_ran(rejected) and ever_ran(task("running"))
    assert task_error(rejected) == "assigned node no longer meets constraints"
    assert newest_task([task("failed", 1, at="2026-01-01T00:00:01"), task("running", at="2026-01-01T00:00:02")]) \
        ["Status"]["State"] == "running"


def test_backend_choice_flag_then_env_then_jobs_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLOWER_BATCH_BACKEND", raising=False)
    assert backend_name() == "docker"
    assert backend_name(None, "swarm") == "swarm"
    monkeypatch.setenv("FLOWER_BATCH_BACKEND", "docker")
    assert backend_name(None, "swarm") == "docker"
    assert backend_name("swarm", None) == "swarm"
    monkeypatch.setenv("FLOWER_BATCH_BACKEND", "kubernetes")
    with pytest.raises(BackendChoiceError, match="FLOWER_BATCH_BACKEND 'kubernetes': use one of docker, swarm"):
        backend_name()


def write_jobs(tmp_path: Path, extra: str) -> Path:
    (tmp_path / "ws").mkdir(exist_ok=True)
    path = tmp_path / "jobs.toml"
    path.write_text(textwrap.dedent(f"""
        [batch]
        name = "p"
        {extra}

        [tasks.a]
        prompt = "hi"
        workspace = "ws"
    """))
    return path


def test_placement_and_backend_in_jobs_toml(tmp_path: Path) -> None:
    path = write_jobs(tmp_path, 'backend = "swarm"\n[defaults]\nplacement = ["node.labels.pool==big", "node.role != manager"]')
    jf = load_jobs_file(path)
    job = jf.jobs[0]
    assert jf.backend == "swarm" and job.placement == ("node.labels.pool==big", "node.role != manager")
    assert job.to_dict()["placement"] == ["node.labels.pool==big", "node.role != manager"]
    # where a job runs is not one of its inputs: the same hash with or without placement
    bare = load_jobs_file(write_jobs(tmp_path, ""))
    assert bare.jobs[0].inputs_hash("sha256:x") == job.inputs_hash("sha256:x")
    assert type(job).from_dict(job.to_dict()) == job


@pytest.mark.parametrize(("extra", "words"), [
    ('backend = "k8s"', ["batch.backend", 'expected "docker" or "swarm"']),
    ('[defaults]\nplacement = "node.role==worker"', ["placement", "expected a list of constraints"]),
    ('[defaults]\nplacement = ["pool=big"]', ["placement[0]", 'like "node.labels.pool==big"']),
])
def test_bad_backend_or_placement_is_one_line(tmp_path: Path, extra: str, words: list[str]) -> None:
    with pytest.raises(MatrixFileError) as caught:
        load_jobs_file(write_jobs(tmp_path, extra))
    text = str(caught.value)
    assert len(text.strip().splitlines()) == 1, text
    for word in words:
        assert word in text, text


def test_secret_files_are_read_into_the_env(tmp_path: Path) -> None:
    (tmp_path / "S").write_text("from-file\n")
    env = {"S_FILE": str(tmp_path / "S"), "T": "direct", "T_FILE": str(tmp_path / "missing")}
    secrets_from_files(["S", "T", "U"], env)
    assert env["S"] == "from-file" and env["T"] == "direct" and "U" not in env


def test_storage_probe_markers(tmp_path: Path) -> None:
    probe = Probe(tmp_path)
    probe.write()
    cmd = probe.command()
    # what a node runs, run here: it finds the host's marker and answers with its name
    subprocess.run(cmd, check=True, env={"FB_NODE": "n1", "PATH": "/usr/bin:/bin"})
    assert probe.answered("n1") and not probe.answered("n2")
    (probe.dir / "host").write_text("other\n")  # different storage at the same path
    assert subprocess.run(cmd, env={"FB_NODE": "n2", "PATH": "/usr/bin:/bin"}).returncode != 0
    probe.clean()
    assert list(tmp_path.iterdir()) == []


def test_push_reference_names_the_bytes() -> None:
    assert push_reference("reg:5000/", "sha256:" + "ab" * 32) == "reg:5000/flower-batch-runtime:abababababab"
    with pytest.raises(RegistryError, match="expected HOST"):
        push_reference("https://reg", "sha256:00")
    digests = ["other:5000/flower-batch-runtime@sha256:1", "reg:5000/flower-batch-runtime@sha256:2"]
    assert repo_digest_for(digests, "reg:5000") == "reg:5000/flower-batch-runtime@sha256:2"
    assert repo_digest_for(digests, "nope:1") is None


def test_a_task_on_its_node_but_not_reported_running_can_be_signalled() -> None:
    # its process may run before the manager hears so: `signal` (and so `stop`) must not refuse it
    for state in ("assigned", "accepted", "preparing", "ready", "starting"):
        assert task_state(task(state, container=False)) == ("created", None) and on_its_node(task(state))
    for state in ("new", "pending", "running", "complete", "failed", "rejected"):
        assert not on_its_node(task(state))
    assert not on_its_node(None)  # a service not started: nothing to signal


def test_a_signal_written_before_the_task_starts_is_delivered_as_it_starts(tmp_path: Path) -> None:
    control = tmp_path / "signal"
    control.write_text("15\n")  # `stop` on a task its node has not started yet
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "flower_batch.backend.task_signals", str(control), "--",
                             "sleep", "600"])
    assert proc.wait(timeout=30) == 143 and time.monotonic() - t0 < 30


def test_task_signals_forwards_control_file_signals(tmp_path: Path) -> None:
    control = tmp_path / "signal"
    control.write_text("")
    proc = subprocess.Popen([sys.executable, "-m", "flower_batch.backend.task_signals", str(control), "--",
                             "sh", "-c", f"trap 'echo term > {tmp_path}/got; exit 7' TERM; touch {tmp_path}/ready; "
                             "while true; do sleep 0.05; done"])
    deadline = time.monotonic() + 10
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    control.write_text("15\n")
    assert proc.wait(timeout=10) == 7 and (tmp_path / "got").read_text() == "term\n"
    control.write_text("")  # a fresh task's control file (the backend makes one per task)
    proc = subprocess.Popen([sys.executable, "-m", "flower_batch.backend.task_signals", str(control), "--",
                             "sh", "-c", "trap '' TERM; while true; do sleep 0.05; done"])
    time.sleep(0.5)
    with control.open("a") as f:
        f.write("15\n")  # ignored by the command
    time.sleep(0.5)
    assert proc.poll() is None
    with control.open("a") as f:
        f.write("9\n")
    assert proc.wait(timeout=10) == 137


def test_a_bad_backend_is_refused_in_one_line_before_anything_is_written(tmp_path: Path) -> None:
    import shutil

    from tests.batch_fixtures.rig import FLOWER_BATCH, PROJECT, command_env

    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    (project / "j.toml").write_text('[defaults]\ngateway = { mode = "scripted", scenario = "scenarios/quick.toml" }\n'
                                    '[tasks.a]\nprompt = "x"\nworkspace = "tasks/alpha"\n')
    home = tmp_path / "home"
    env = {k: v for k, v in command_env().items() if k != "DOCKER_HOST"}
    done = subprocess.run([str(FLOWER_BATCH), "matrix", str(project / "j.toml"), "--backend", "k8s", "--home", str(home)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and done.stderr.strip() == "flower-batch: --backend 'k8s': use one of docker, swarm"
    assert not home.exists()
