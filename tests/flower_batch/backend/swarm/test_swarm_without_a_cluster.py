"""The Swarm backend's pure parts, with no cluster: reading task states, choosing the backend,
`placement` in jobs.toml, secret files, the storage probe's markers and the push reference."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from flower_batch.backend.docker.registry import push_reference, repo_digest_for
from flower_batch.backend.select import backend_name
from flower_batch.backend.swarm.storage import Probe
from flower_batch.backend.swarm.tasks import ever_ran, newest_task, on_its_node, task_error, task_state
from flower_batch.errors import BackendChoiceError, MatrixFileError, RegistryError
from flower_batch.gateway.tokens import secrets_from_files
from flower_batch.jobsfile import load_jobs_file


def task(
    state: str, exit_code: int | None = None, container: bool = True, err: str = "", at: str = "1"
) -> dict:
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
    assert (
        newest_task([task("failed", 1, at="2026-01-01T00:00:01"), task("running", at="2026-01-01T00:00:02")])[
            "Status"
        ]["State"]
        == "running"
    )


def test_backend_choice_flag_then_env_then_jobs_file() -> None:
    assert backend_name() == "docker"
    assert backend_name(None, None, "swarm") == "swarm"
    assert backend_name(None, "docker", "swarm") == "docker"
    assert backend_name("swarm", "docker", None) == "swarm"
    with pytest.raises(
        BackendChoiceError, match="FLOWER_BATCH_BACKEND 'kubernetes': use one of docker, swarm"
    ):
        backend_name(None, "kubernetes")


def write_jobs(tmp_path: Path, extra: str) -> Path:
    (tmp_path / "ws").mkdir(exist_ok=True)
    path = tmp_path / "jobs.toml"
    path.write_text(
        textwrap.dedent(f"""
        [batch]
        name = "p"
        {extra}

        [tasks.a]
        prompt = "hi"
        workspace = "ws"
    """)
    )
    return path


def test_placement_and_backend_in_jobs_toml(tmp_path: Path) -> None:
    path = write_jobs(
        tmp_path,
        'backend = "swarm"\n[defaults]\nplacement = ["node.labels.pool==big", "node.role != manager"]',
    )
    jf = load_jobs_file(path)
    job = jf.jobs[0]
    assert jf.backend == "swarm" and job.placement == ("node.labels.pool==big", "node.role != manager")
    assert job.to_dict()["placement"] == ["node.labels.pool==big", "node.role != manager"]
    # where a job runs is not one of its inputs: the same hash with or without placement
    bare = load_jobs_file(write_jobs(tmp_path, ""))
    assert bare.jobs[0].inputs_hash("sha256:x") == job.inputs_hash("sha256:x")
    assert type(job).from_dict(job.to_dict()) == job


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ('backend = "k8s"', ["batch.backend", 'expected "docker" or "swarm"']),
        ('[defaults]\nplacement = "node.role==worker"', ["placement", "expected a list of constraints"]),
        ('[defaults]\nplacement = ["pool=big"]', ["placement[0]", 'like "node.labels.pool==big"']),
    ],
)
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
    proc = subprocess.Popen(
        [sys.executable, "-m", "flower_batch.backend.swarm.task_signals", str(control), "--", "sleep", "600"]
    )
    assert proc.wait(timeout=30) == 143 and time.monotonic() - t0 < 30


def test_task_signals_forwards_control_file_signals(tmp_path: Path) -> None:
    control = tmp_path / "signal"
    control.write_text("")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flower_batch.backend.swarm.task_signals",
            str(control),
            "--",
            "sh",
            "-c",
            f"trap 'echo term > {tmp_path}/got; exit 7' TERM; touch {tmp_path}/ready; "
            "while true; do sleep 0.05; done",
        ]
    )
    deadline = time.monotonic() + 10
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    control.write_text("15\n")
    assert proc.wait(timeout=10) == 7 and (tmp_path / "got").read_text() == "term\n"
    control.write_text("")  # a fresh task's control file (the backend makes one per task)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flower_batch.backend.swarm.task_signals",
            str(control),
            "--",
            "sh",
            "-c",
            "trap '' TERM; while true; do sleep 0.05; done",
        ]
    )
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
    (project / "j.toml").write_text(
        '[defaults]\ngateway = { mode = "scripted", scenario = "scenarios/quick.toml" }\n'
        '[tasks.a]\nprompt = "x"\nworkspace = "tasks/alpha"\n'
    )
    home = tmp_path / "home"
    env = {k: v for k, v in command_env().items() if k != "DOCKER_HOST"}
    done = subprocess.run(
        [str(FLOWER_BATCH), "matrix", str(project / "j.toml"), "--backend", "k8s", "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert (
        done.returncode == 2
        and done.stderr.strip() == "flower-batch: --backend 'k8s': use one of docker, swarm"
    )
    assert not home.exists()


# -- the service spec a job becomes (no cluster: a recording stand-in for the engine's API) --------
GIB = 1024**3
DIGEST = "sha256:" + "cd" * 32
PINNED = f"reg:5000/flower-batch-runtime@{DIGEST}"


def node(
    host: str, cpus: float, gib: float, role: str = "worker", state: str = "ready", labels: dict | None = None
) -> dict:
    return {
        "ID": f"id-{host}",
        "Description": {
            "Hostname": host,
            "Resources": {"NanoCPUs": int(cpus * 1e9), "MemoryBytes": int(gib * GIB)},
        },
        "Spec": {"Role": role, "Availability": "active", "Labels": labels or {}},
        "Status": {"State": state},
    }


class EngineAPI:
    """What SwarmBackend.create asks the manager, answered from fixed nodes; records what it makes."""

    def __init__(self, nodes: list[dict]) -> None:
        self._nodes = nodes
        self.services: list[dict] = []
        self.secrets: dict[str, bytes] = {}

    def nodes(self) -> list[dict]:
        return self._nodes

    def inspect_distribution(self, ref: str) -> dict:
        return {"Descriptor": {"digest": ref.rsplit("@", 1)[1]}}

    def inspect_image(self, ref: str) -> dict:
        return {
            "Id": "sha256:" + "ee" * 32,
            "RepoTags": [],
            "Size": 1,
            "Config": {"Labels": {"org.flower-batch.build-key": "key-of-the-pinned-build"}},
        }

    def create_secret(self, name: str, data: bytes, labels: dict) -> dict:
        self.secrets[name] = data
        return {"ID": f"sec-{len(self.secrets)}"}

    def create_service(self, template: dict, **kwargs: object) -> dict:
        self.services.append({"TaskTemplate": template, **kwargs})
        return {"ID": f"svc-{len(self.services)}"}


def swarm_backend(tmp_path: Path, api: EngineAPI):  # type: ignore[no-untyped-def]
    from flower_batch.backend.swarm.backend import SwarmBackend

    backend = SwarmBackend(control_dir=tmp_path / "control", registry="reg:5000")
    backend._conn._client = api  # type: ignore[assignment]
    backend._verified.append(tmp_path)  # shared storage: checked by the cluster tests
    return backend


def job_spec(tmp_path: Path, **kw: object):  # type: ignore[no-untyped-def]
    from flower_batch.backend.base import ContainerSpec, Mount

    return ContainerSpec(
        image=PINNED,
        command=["flower", "run"],
        env={"HOME": "/tmp"},
        mounts=[Mount(str(tmp_path / "ws"), "/workspace")],
        user="1000:1000",
        labels={"org.flower-batch.managed": "1"},
        name="fb-j1",
        **kw,
    )  # type: ignore[arg-type]


def test_a_job_reserves_what_it_may_use_and_runs_once(tmp_path: Path) -> None:
    import anyio

    api = EngineAPI([node("m", 2, 8, role="manager"), node("w1", 2, 8)])
    backend = swarm_backend(tmp_path, api)
    anyio.run(backend.create, job_spec(tmp_path, cpus=0.5, memory=GIB))
    (svc,) = api.services
    resources = svc["TaskTemplate"]["Resources"]
    assert resources["Limits"] == {"NanoCPUs": 500_000_000, "MemoryBytes": GIB, "Pids": 2048}
    assert resources["Reservations"] == {"NanoCPUs": 500_000_000, "MemoryBytes": GIB}
    # confined as on one machine (docs/security.md): no capability, a read-only root, /tmp a tmpfs
    container = svc["TaskTemplate"]["ContainerSpec"]
    assert container["CapabilityDrop"] == ["ALL"] and container["ReadOnly"] is True
    assert {"Target": "/tmp", "Type": "tmpfs", "TmpfsOptions": {"SizeBytes": GIB}} in container["Mounts"]
    # a replicated service of one task that never restarts: its finished task lets go of its
    # reservation (a replicated-job's never does on Swarm 20.10)
    assert svc["mode"].mode == "replicated" and svc["mode"]["replicated"] == {"Replicas": 0}
    assert svc["TaskTemplate"]["RestartPolicy"]["Condition"] == "none"
    assert svc["TaskTemplate"]["ContainerSpec"]["Image"] == PINNED


def test_a_reservation_no_node_can_hold_is_refused_in_one_line_before_anything_is_made(
    tmp_path: Path,
) -> None:
    import anyio

    from flower_batch.errors import ReservationUnmet

    api = EngineAPI([node("m", 2, 8, role="manager"), node("w1", 4, 16), node("w2", 8, 512, state="down")])
    backend = swarm_backend(tmp_path, api)
    with pytest.raises(ReservationUnmet) as caught:
        anyio.run(backend.create, job_spec(tmp_path, cpus=8, memory=600 * GIB))
    text = str(caught.value)
    assert text == (
        "no node of the swarm can run fb-j1: it reserves 8 CPUs and 600.0 GiB but no node has that much "
        "(the largest, w2, has 8 CPUs and 512.0 GiB): lower `cpus`/`memory` in jobs.toml or add a "
        "bigger node"
    )
    assert api.services == [] and api.secrets == {}
    # placement narrows the nodes that count
    with pytest.raises(ReservationUnmet, match="the largest, m, has 2 CPUs"):
        anyio.run(backend.create, job_spec(tmp_path, cpus=3, placement=["node.role==manager"]))
    with pytest.raises(ReservationUnmet, match="no node matches its placement"):
        anyio.run(backend.create, job_spec(tmp_path, cpus=1, placement=["node.labels.pool==big"]))
    anyio.run(backend.create, job_spec(tmp_path, cpus=3, memory=16 * GIB, placement=["node.hostname!=m"]))
    # a node that is down now may come back: its task waits (pending), as Swarm keeps it
    anyio.run(backend.create, job_spec(tmp_path, cpus=6, memory=100 * GIB))
    assert len(api.services) == 2


def test_unmet_reservation_reads_nodes_as_swarm_matches_them() -> None:
    from flower_batch.backend.swarm.fit import matches, unmet_reservation

    big = node("w1", 4, 16, labels={"pool": "big"})
    assert matches(big, ["node.labels.pool==big", "node.role != manager", "engine.labels.os==linux"])
    assert not matches(big, ["node.labels.pool!=big"]) and not matches(big, ["node.hostname==w2"])
    assert unmet_reservation([big], None, None, []) is None
    assert unmet_reservation([big], 4_000_000_000, 16 * GIB, []) is None
    assert unmet_reservation([node("x", 8, 8, state="down")], 1, None, []) is None
    assert "the swarm has no node" in (unmet_reservation([], 1, None, []) or "")


def test_secrets_and_tokens_are_engine_secrets_no_inspect_shows(tmp_path: Path) -> None:
    import anyio

    api = EngineAPI([node("m", 2, 8, role="manager")])
    backend = swarm_backend(tmp_path, api)
    token, gh = "fbj-" + "1" * 40, "ghp-secret-value"
    anyio.run(backend.create, job_spec(tmp_path, secrets={"ANTHROPIC_API_KEY": token, "GITHUB_TOKEN": gh}))
    (svc,) = api.services
    assert sorted(api.secrets.values()) == [token.encode(), gh.encode()]
    container = svc["TaskTemplate"]["ContainerSpec"]
    assert token not in repr(svc) and gh not in repr(svc)
    env = dict(e.split("=", 1) for e in container["Env"])
    assert env["ANTHROPIC_API_KEY_FILE"] == "/run/secrets/ANTHROPIC_API_KEY"
    assert env["FB_SECRET_NAMES"] == "ANTHROPIC_API_KEY,GITHUB_TOKEN"
    assert {s["File"]["Name"] for s in container["Secrets"]} == {"ANTHROPIC_API_KEY", "GITHUB_TOKEN"}
    assert all(s["File"]["Mode"] == 0o400 and s["File"]["UID"] == "1000" for s in container["Secrets"])
    # and the task's supervisor hands the command each one as env NAME, the file's exact bytes
    files = tmp_path / "secrets"
    files.mkdir()
    (files / "ANTHROPIC_API_KEY").write_text(token)
    (files / "GITHUB_TOKEN").write_text(gh)
    from flower_batch.backend.secret_env import command_env

    got = command_env(
        {
            "FB_SECRET_NAMES": "ANTHROPIC_API_KEY,GITHUB_TOKEN",
            "HOME": "/tmp",
            "ANTHROPIC_API_KEY_FILE": str(files / "ANTHROPIC_API_KEY"),
            "GITHUB_TOKEN_FILE": str(files / "GITHUB_TOKEN"),
        }
    )
    assert got["ANTHROPIC_API_KEY"] == token and got["GITHUB_TOKEN"] == gh and "FB_SECRET_NAMES" not in got


def test_the_pinned_build_is_checked_against_what_the_node_ran(tmp_path: Path) -> None:
    import anyio

    from flower_batch.backend.swarm.task_signals import report_image
    from flower_batch.backend.swarm.tasks import image_drift

    api = EngineAPI([node("m", 2, 8, role="manager")])
    anyio.run(swarm_backend(tmp_path, api).create, job_spec(tmp_path))
    env = dict(e.split("=", 1) for e in api.services[0]["TaskTemplate"]["ContainerSpec"]["Env"])
    assert env["FB_IMAGE_KEY"] == "key-of-the-pinned-build"  # the manager's label, handed to the task
    # the node's side: the key baked into the image it runs, written next to the control file
    (tmp_path / "task").mkdir()
    (tmp_path / "build-key").write_text("key-of-the-pinned-build\n")
    assert report_image(tmp_path / "task" / "signal", tmp_path / "build-key") == "key-of-the-pinned-build"
    assert (tmp_path / "task" / "image").read_text() == "key-of-the-pinned-build\n"
    assert report_image(tmp_path / "task" / "signal", tmp_path / "no-such-file") == ""
    # the orchestrator's side
    assert image_drift("fb-j1", "w1", "key-of-the-pinned-build", "key-of-the-pinned-build") is None
    assert image_drift("fb-j1", "w1", "", None) is None  # no key to pin (an image without the label)
    assert image_drift("fb-j1", "w2", "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb") == (
        "node w2 ran other bytes for fb-j1: image build bbbbbbbbbbbb, not the pinned aaaaaaaaaaaa — remove the "
        "runtime image on w2 so it pulls the pinned one, then run the job again"
    )
    assert "an image that reports no build" in (image_drift("fb-j1", "w2", "aaaa", None) or "")


def test_a_report_removed_with_its_service_is_not_drift_but_a_missing_one_is(tmp_path: Path) -> None:
    """`stop` waits on the same task as the orchestrator that ran it, which removes the service
    and its control folder (the report in it) once it has checked the report itself."""
    import os

    import anyio

    from flower_batch.errors import ImageDrift

    backend = swarm_backend(tmp_path, EngineAPI([node("w1", 2, 8)]))
    data = {
        "Spec": {
            "Name": "fb-j1",
            "Labels": {},
            "TaskTemplate": {"ContainerSpec": {"Env": ["FB_IMAGE_KEY=key-of-the-pinned-build"]}},
        }
    }
    task: dict = {"ID": "t1"}  # no NodeID: the host is "?"
    anyio.run(backend._check_ran, data, task)  # no folder: removed by its owner, who checked it
    (tmp_path / "control" / "fb-j1").mkdir(parents=True)
    with pytest.raises(ImageDrift, match="an image that reports no build"):
        anyio.run(backend._check_ran, data, task)  # the task never wrote it: not our image
    (tmp_path / "control" / "fb-j1" / "image").write_text("key-of-the-pinned-build\n")
    anyio.run(backend._check_ran, data, task)
    # The job in the task may write that file: a huge one is read no further than a key's length,
    # and one that is not a regular file (a FIFO would block a read) is no report at all.
    (tmp_path / "control" / "fb-j1" / "image").write_bytes(b"x" * 10_000_000)
    with pytest.raises(ImageDrift, match="image build xxxxxxxxxxxx, not the pinned"):
        anyio.run(backend._check_ran, data, task)
    (tmp_path / "control" / "fb-j1" / "image").unlink()
    os.mkfifo(tmp_path / "control" / "fb-j1" / "image")

    async def bounded() -> None:
        with anyio.fail_after(10):  # a blocked read would be a TimeoutError, not the drift
            await backend._check_ran(data, task)

    with pytest.raises(ImageDrift, match="an image that reports no build"):
        anyio.run(bounded)


def test_task_signals_refuses_to_run_other_bytes(tmp_path: Path) -> None:
    control = tmp_path / "signal"
    control.write_text("")
    env = {"PATH": "/usr/bin:/bin", "FB_IMAGE_KEY": "the-pinned-key"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "flower_batch.backend.swarm.task_signals",
            str(control),
            "--",
            "touch",
            str(tmp_path / "ran"),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    # this machine has no /opt/flower/build-key: not the pinned build, so the command never ran
    assert done.returncode == 125 and "not starting (drift)" in done.stderr
    assert not (tmp_path / "ran").exists() and (tmp_path / "image").read_text() == "\n"


def test_a_swarm_log_is_split_into_lines_and_stamps_as_it_streams() -> None:
    from flower_batch.backend.swarm.logs import LineSplitter, LogStamp, split_stamp

    lines = LineSplitter()
    text = "2026-12-01T16:58:50.1Z first\n2026-12-01T16:58:50.12Z sé".encode()
    got = [*lines.feed(text[:-1]), *lines.feed(text[-1:] + b"cond\r\nno stamp here\nlast"), *lines.rest()]
    assert got == [
        "2026-12-01T16:58:50.1Z first",
        "2026-12-01T16:58:50.12Z s\u00e9cond",
        "no stamp here",
        "last",
    ]
    first, second = split_stamp(got[0]), split_stamp(got[1])
    # Swarm trims trailing zeros: .1 is 100 ms, before .12, though "50.1Z" sorts after "50.12Z" as text
    assert (
        first == (LogStamp(1796144330, 100_000_000), "first")
        and first[0] < second[0]
        and second[1] == "s\u00e9cond"
    )
    assert split_stamp("no stamp here") == (None, "no stamp here")
    assert split_stamp("2026-13-01T00:00:00Z bad month") == (None, "2026-13-01T00:00:00Z bad month")
