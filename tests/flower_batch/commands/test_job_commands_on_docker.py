"""`flower-batch run` / `wake` / `ls` / `show` / `stop` / `gc` end to end (issue 5), on the real
Docker engine, the real runtime image and the real CLI inside it, against the scripted gateway.

Every command runs as a subprocess with `--home` in a temporary folder and no TTY, as in CI.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from flower_batch.backend.confinement import sandbox_ids, sandbox_user
from tests.batch_fixtures.rig import (
    BATCH,
    FLOWER_BATCH,
    JOB,
    LEASE,
    MANAGED,
    PROJECT,
    REPO,
    ROLE,
    VERSION,
    Job,
    command_env,
    docker_client,
    fb,
    fb_start,
    labelled,
    leftovers,
    message_texts,
    one_line_error,
    private_home,
    runtime_image,
    sessions_of,
    sigkill_group,
    wait_for,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]  # every test here runs containers


@pytest.fixture(scope="module")
def image_id() -> str:
    return runtime_image()


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    yield from private_home(tmp_path)


PROMPT = "Read TASK.md and do what it asks."
SOLO = f"{PROJECT}/flows.py:solo"
QUICK = PROJECT / "scenarios" / "quick.toml"
SLOW = PROJECT / "scenarios" / "slow.toml"


def start_slow(home: Path, name: str, tmp: Path, *extra: str) -> tuple[subprocess.Popen[str], Job]:
    """A `run` whose step stalls at the model; returns once the stalled request is in flight."""
    proc = fb_start(
        "run",
        PROJECT / "tasks" / "slow",
        "-f",
        SOLO,
        "--prompt",
        PROMPT,
        "--scenario",
        SLOW,
        "--name",
        name,
        *extra,
        home=home,
        log=tmp / f"{name}.out",
    )
    job = Job(home, "adhoc", name)
    try:
        wait_for(
            f"{name} to stall at the model",
            lambda: any(r["rule"] == "stall" for r in job.gateway_log()) or proc.poll() is not None,
        )
    except AssertionError:
        proc.kill()
        raise
    assert proc.poll() is None, (tmp / f"{name}.out").read_text()
    return proc, job


# Run on the batch network: what the gateway answers to a wrong token, another job's path, no
# token, and the job's own token (count_tokens: guarded like messages, and needs no rule).
PROBE = """
import http.client, json, socket, sys
job, token = sys.argv[1], sys.argv[2]
class Unix(http.client.HTTPConnection):  # the job's own socket, as flower's relay reaches it
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect("/run/flower-gateway/gateway.sock")
def post(path, key):
    headers = {"content-type": "application/json", **({"x-api-key": key} if key else {})}
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    conn = Unix("gateway", timeout=10)
    conn.request("POST", path, body=body, headers=headers)
    return conn.getresponse().status
count = "/v1/messages/count_tokens"
print(json.dumps({"wrong": post(f"/j/{job}{count}", "fbj-wrong"),
                  "other-job": post(f"/j/other{count}", token),
                  "none": post(f"/j/{job}{count}", ""), "own": post(f"/j/{job}{count}", token)}))
"""


def output_of(tmp: Path, name: str) -> str:
    return (tmp / f"{name}.out").read_text()


# -- one job, start to finish ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def finished(
    image_id: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Job, subprocess.CompletedProcess]:
    root = tmp_path_factory.mktemp("run") / "home"
    proc = fb(
        "run",
        PROJECT / "tasks" / "alpha",
        "-f",
        SOLO,
        "--prompt",
        PROMPT,
        "--scenario",
        QUICK,
        "--name",
        "alpha1",
        "--image",
        image_id,
        "--cpus",
        "1",
        "--memory",
        "1g",
        "--env",
        "MOOD=calm",
        home=root,
    )
    yield Job(root, "adhoc", "alpha1"), proc
    assert not leftovers(root, "adhoc"), "the module's job leaked"


def test_run_completes_in_a_container_and_records_everything(finished, image_id: str) -> None:
    job, proc = finished
    assert proc.returncode == 0, proc.stderr
    rec = job.record()
    assert rec["status"] == "passed" and rec["reason"] is None
    assert rec["exit_code"] == 0 and rec["workflow_ok"] is True
    assert rec["image_id"] == image_id
    assert set(rec["versions"]) == {"flower_batch", "sdk", "cli"} and all(rec["versions"].values())
    assert rec["gateway_mode"] == "scripted"
    assert rec["queued_at"] and rec["started_at"] and rec["finished_at"] and rec["duration_s"] > 0
    assert rec["cost_usd"] and rec["cost_usd"] > 0 and rec["num_turns"] >= 3
    assert (
        rec["spec"]["cpus"] == 1
        and rec["spec"]["memory_bytes"] == 1 << 30
        and rec["spec"]["env"] == {"MOOD": "calm"}
    )
    # the record's totals are the manifest's rows
    rows = job.manifest()
    assert [r["step"] for r in rows] == ["do"] and rows[0]["ok"]
    assert rec["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in rows))
    assert rec["num_turns"] == sum(r["num_turns"] for r in rows)
    assert [s["name"] for s in rec["steps"]] == ["do"]
    # the agent's file is in the host's workspace copy, owned by the sandbox's user: the user who
    # ran flower-batch, or uid 10001 when that is root (confinement.py)
    answer = job.root / "workspace" / "answer.txt"
    assert answer.read_text() == "alpha\n"
    for path in (answer, job.root / "runs" / "manifest.json", job.root / "runs" / "sessions.db"):
        assert (path.stat().st_uid, path.stat().st_gid) == sandbox_ids() != (0, 0), path
    # the container saw the fixed paths
    assert rows[0]["tool_calls"][0]["input"]["file_path"] == "/workspace/TASK.md"
    # the source task folder was copied, not used
    assert not (PROJECT / "tasks" / "alpha" / "answer.txt").exists()
    # every request reached the gateway under the job's own path
    requests = job.gateway_log()
    assert (
        requests
        and {r["prefix"] for r in requests} == {"/j/alpha1"}
        and {r["status"] for r in requests} == {200}
    )
    # plain lines without a TTY
    assert "\x1b[" not in proc.stderr + proc.stdout
    assert "alpha1: passed" in proc.stderr and "scripted" in proc.stderr


def test_run_leaves_no_container_or_network(finished) -> None:
    job, _ = finished
    sessions = sessions_of(job.home, "adhoc")
    assert len(sessions) == 1
    assert not labelled("adhoc", sessions), labelled("adhoc", sessions).describe()
    assert not (job.home / ".sessions" / f"{sessions.pop()}.lock").exists()


def test_show_and_ls_json_agree_with_record_and_manifest(finished) -> None:
    job, _ = finished
    shown = fb("show", "alpha1", "--json", home=job.home)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["record"] == job.record()
    assert data["manifest"] == job.manifest()
    listed = fb("ls", "--json", home=job.home)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    rec = job.record()
    assert len(rows) == 1
    row = rows[0]
    assert (row["batch"], row["job"], row["persistent"]) == ("adhoc", "alpha1", False)
    for key in (
        "status",
        "reason",
        "cost_usd",
        "num_turns",
        "duration_s",
        "started_at",
        "gateway_mode",
        "attempt",
        "image_id",
    ):
        assert row[key] == rec[key], key
    # the human forms carry the same facts, as plain text
    table = fb("show", "adhoc/alpha1", home=job.home)
    assert table.returncode == 0 and "\x1b[" not in table.stdout
    assert "passed" in table.stdout and rec["image_id"] in table.stdout and "scripted" in table.stdout


# -- secrets ------------------------------------------------------------------------------------------
def test_a_secret_reaches_the_job_and_no_file(image_id: str, home: Path) -> None:
    secret = f"fbsecret-{secrets.token_hex(16)}"
    proc = subprocess.run(
        [
            str(FLOWER_BATCH),
            "run",
            str(PROJECT / "tasks" / "secret"),
            "-f",
            SOLO,
            "--prompt",
            PROMPT,
            "--scenario",
            str(QUICK),
            "--name",
            "keeper",
            "--secret",
            "FB_TEST_SECRET",
            "--image",
            image_id,
            "--persistent",
            "--home",
            str(home),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
        env={**command_env(), "FB_TEST_SECRET": secret},
    )
    assert proc.returncode == 0, proc.stderr
    job = Job(home, "adhoc", "keeper")
    # it was in the job's environment (the agent's Bash saw it) ...
    seen = [r for r in job.gateway_log() if r["rule"] == "secret: seen"]
    assert seen and "the secret is set (41 chars)" in message_texts(seen[0])
    assert job.record()["spec"]["secrets"] == ["FB_TEST_SECRET"]
    # ... and is in no file flower-batch, flower, the CLI or the gateway wrote
    files = [p for p in home.rglob("*") if p.is_file()]
    assert len(files) > 10
    assert not [p for p in files if secret.encode() in p.read_bytes()]
    assert secret not in proc.stdout + proc.stderr
    # nor is the job's gateway token (the CLI's ANTHROPIC_API_KEY in the container)
    assert not [p for p in files if re.search(rb"fbj-[0-9a-f]{40}", p.read_bytes())]


# -- bad input: one line, exit 2 ----------------------------------------------------------------
def test_bad_input_is_one_line_and_exit_2(finished, tmp_path: Path) -> None:
    job, _ = finished
    base = ["-f", SOLO, "--prompt", PROMPT, "--scenario", QUICK]
    alpha = PROJECT / "tasks" / "alpha"
    cases = [  # (arguments, words the one line must contain)
        (["run", tmp_path / "missing", *base], ["missing", "not a directory"]),
        (["run", alpha, *base, "--timeout", "ten"], ["--timeout", "'ten'"]),
        (["run", alpha, *base, "--timeout", "0"], ["--timeout"]),
        (["run", alpha, *base, "--memory", "lots"], ["--memory"]),
        (["run", alpha, *base, "--name", "alpha1"], ["already exists", "wake"]),
        (["run", alpha, "-f", "nosuchmodule:flow", "--scenario", QUICK], ["nosuchmodule"]),
        (["wake", "nosuch"], ["no job named nosuch"]),
        (["wake", "alpha1"], ["not started with --persistent"]),
        (["show", "nosuch"], ["nosuch"]),  # logs/stop share its job lookup
    ]
    # each is a fresh process (its start-up dominates): a few at a time
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda case: fb(*case[0], home=job.home), cases))
    for (_, words), proc in zip(cases, results, strict=True):
        one_line_error(proc, *words)
    # nothing was created for the refused runs
    assert sorted(p.name for p in (job.home / "adhoc").iterdir() if not p.name.startswith(".")) == ["alpha1"]


# -- killed mid-step, woken in a new container ------------------------------------------------------
def test_killed_mid_step_then_wake_continues_the_same_session(
    image_id: str, home: Path, tmp_path: Path
) -> None:
    proc, job = start_slow(home, "sleeper", tmp_path, "--persistent", "--image", image_id)
    record = job.record()
    assert record["status"] == "running" and record["container"]
    session = job.lineage()["steps"]["do"]  # lineage knows the session before the step ends
    before = job.gateway_log()
    assert before[-1]["session"] == session and before[-1]["rule"] == "stall"

    # The job's container as Docker sees it: labels, fixed mounts, the sandbox's uid, limits.
    client = docker_client()
    try:
        container = client.containers.get(record["container"])
        labels = container.labels
        assert labels[MANAGED] == "1" and labels[BATCH] == "adhoc" and labels[JOB] == "sleeper"
        assert labels[ROLE] == "job" and labels[VERSION] and labels[LEASE] in sessions_of(home, "adhoc")
        assert container.attrs["Config"]["User"] == sandbox_user() != "0:0"
        host = container.attrs["HostConfig"]  # confined (docs/security.md)
        assert host["CapDrop"] == ["ALL"] and host["SecurityOpt"] == ["no-new-privileges"]
        assert host["PidsLimit"] == 2048 and host["ReadonlyRootfs"] is True and "/tmp" in host["Tmpfs"]
        assert host["NetworkMode"] == "none" and container.attrs["Config"]["NetworkDisabled"] is True
        assert container.exec_run(["getent", "hosts", "localhost"]).output.split()[1] == b"localhost"
        # everything this orchestrator made carries the labels gc relies on (scripted mode on one
        # machine makes no network: the job and its gateway have none)
        made = labelled("adhoc", {labels[LEASE]})
        assert sorted(c.labels[ROLE] for c in made.containers) == ["gateway", "job"]
        assert made.networks == []
        for found in [c.labels for c in made.containers] + [n.attrs["Labels"] for n in made.networks]:
            assert {MANAGED, BATCH, ROLE, VERSION, LEASE} <= set(found), found
            assert found[BATCH] == "adhoc" and found[LEASE] == labels[LEASE]
        # the job's folders, from its own disk (running/job_disk.py), which the host's show live
        mounts = {m["Destination"]: m["Source"] for m in container.attrs["Mounts"]}
        (disk,) = [
            m["Name"] for m in container.attrs["Mounts"] if m["Type"] == "volume" and "-disk-" in m["Name"]
        ]
        assert mounts["/workspace"].endswith(f"/{disk}/_data/workspace"), mounts
        assert mounts["/runs"].endswith(f"/{disk}/_data/runs"), mounts
        assert os.path.ismount(job.root / "runs") and os.path.ismount(job.root / "workspace")
        env = dict(e.split("=", 1) for e in container.attrs["Config"]["Env"])
        assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8080/j/sleeper"
        assert env["FLOWER_MODEL_SOCKET"] == "/run/flower-gateway/gateway.sock"
        # its token: a 0400 file on a tmpfs (docker/secret_handover.py), not in its configuration
        assert (
            "ANTHROPIC_API_KEY" not in env
            and env["ANTHROPIC_API_KEY_FILE"] == "/run/secrets/ANTHROPIC_API_KEY"
        )
        token = container.exec_run(["cat", "/run/secrets/ANTHROPIC_API_KEY"]).output.decode()
        assert token.startswith("fbj-")
        # The job's own socket: on it, the gateway serves only the job's own token.
        probe = client.containers.run(
            image_id,
            ["python3", "-c", PROBE, "sleeper", token],
            network_mode="none",
            volumes={mounts["/run/flower-gateway"]: {"bind": "/run/flower-gateway", "mode": "rw"}},
            user=sandbox_user(),
            remove=True,
            labels={"org.flower-batch.test": "probe"},
        )
        assert json.loads(probe) == {"wrong": 401, "other-job": 401, "none": 401, "own": 200}
        assert not (home / "adhoc" / "other").exists()  # a refused request makes no job folder
    finally:
        client.close()

    # docker kill: no signal handler runs, the step is cut off mid-request. (A moment first, so
    # the CLI has written the Read's result to its transcript: a kill can lose the last turn.)
    time.sleep(1.5)
    subprocess.run(["docker", "kill", record["container"]], check=True, capture_output=True)
    assert proc.wait(timeout=60) == 3, output_of(tmp_path, "sleeper")  # infrastructure
    killed = job.record()
    assert killed["status"] == "error" and killed["exit_code"] == 137 and killed["class"] == "infrastructure"
    assert killed["reason"].startswith("killed from outside: SIGKILL (exit 137)"), killed["reason"]
    assert not leftovers(home, "adhoc"), leftovers(home, "adhoc").describe()
    assert job.lineage()["woke"] == 1

    # wake: a new container on the recorded image id continues the same session.
    woken = fb("wake", "sleeper", home=home, timeout=90)
    assert woken.returncode == 0, woken.stderr
    rec = job.record()
    assert rec["status"] == "passed" and rec["attempt"] == 2 and rec["image_id"] == image_id
    assert rec["container"] != record["container"]
    lineage = job.lineage()
    assert lineage["woke"] == 2 and lineage["steps"]["do"] == session
    rows = job.manifest()
    assert rows[-1]["step"] == "do" and rows[-1]["ok"] and rows[-1]["session_id"] == session
    after = job.gateway_log()[len(before) :]
    first = next(r for r in after if r["endpoint"] == "messages")
    assert first["session"] == session and first["rule"] == "continued"
    assert first["n_messages"] > before[-1]["n_messages"]  # the earlier turns, then the new prompt
    earlier = message_texts(first)  # the killed container's turns: the model's, the Read's result
    assert "Reading the task." in earlier and "SLOW-TASK" in earlier
    # the wake banner: in the container's log and echoed by `wake`
    last_run = job.container_log().rsplit("--- container", 1)[1]
    assert "wake #2" in last_run
    assert "wake #2" in woken.stderr and "\x1b[" not in woken.stderr
    # ... and what flower keeps quiet about, `wake` says: the step continued its session
    assert f"step do: continued session {session[:8]}… (lineage.json)" in woken.stderr, woken.stderr
    assert [(c["step"], c["continued"], c["session"]) for c in rec["continuity"]] == [("do", True, session)]

    # and again, with more words: they reach the same session as the newest user turn
    again = fb("wake", "sleeper", "Also say hello to the reviewer.", home=home, timeout=90)
    assert again.returncode == 0, again.stderr
    assert job.lineage()["woke"] == 3 and job.lineage()["steps"]["do"] == session
    assert job.record()["attempt"] == 3
    latest = [r for r in job.gateway_log() if r["endpoint"] == "messages"][-1]
    assert latest["session"] == session
    assert "Also say hello to the reviewer." in message_texts(latest).rsplit("SLOW-TASK", 1)[1]
    assert "wake #3" in job.container_log().rsplit("--- container", 1)[1]
    assert not leftovers(home, "adhoc"), leftovers(home, "adhoc").describe()


# -- limits and faults ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def timed_out(
    image_id: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Job, subprocess.CompletedProcess]:
    root = tmp_path_factory.mktemp("timeout") / "home"
    proc = fb(
        "run",
        PROJECT / "tasks" / "slow",
        "-f",
        SOLO,
        "--prompt",
        PROMPT,
        "--scenario",
        SLOW,
        "--name",
        "late",
        "--timeout",
        "45s",  # the stall must be reached first, also when the machine is loaded
        "--env",
        "FLOWER_WRAP_UP=10",
        "--image",
        image_id,
        home=root,
    )
    yield Job(root, "adhoc", "late"), proc
    assert not leftovers(root, "adhoc")


def test_timeout_stops_the_job_with_status_timeout(timed_out) -> None:
    job, proc = timed_out
    assert proc.returncode == 1, proc.stderr
    rec = job.record()
    assert rec["status"] == "timeout" and "timeout" in rec["reason"]
    assert rec["exit_code"] not in (0, None)
    assert 45 <= rec["duration_s"] < 45 + 10 + 10  # timeout, at most the wrap-up window, some slack
    assert any(r["rule"] == "stall" for r in job.gateway_log())  # it was stopped mid-step
    assert "late: timeout" in proc.stderr


def test_at_the_timeout_flower_stops_the_step_itself_before_any_sigterm(timed_out) -> None:
    # The deadline reaches flower through the environment: it interrupts the stalled turn, asks
    # for notes, and records the step `timeout` (tests/flower_batch/running/test_deadline_on_docker.py
    # follows the notes into a wake). The SIGTERM rescue is the orchestrator's fallback.
    job, _ = timed_out
    rows = job.manifest()
    assert rows and rows[-1]["step"] == "do" and not rows[-1]["ok"]
    assert rows[-1]["error"].startswith("timeout: the deadline passed")
    assert job.record()["exit_code"] == 1  # flower's own exit, not 128 + SIGTERM
    shown = json.loads(fb("show", "late", "--json", home=job.home).stdout)
    assert shown["manifest"][-1]["error"].startswith("timeout: the deadline passed")


def test_ctrl_c_stops_the_container_and_writes_the_record(image_id: str, home: Path, tmp_path: Path) -> None:
    proc, job = start_slow(home, "interrupted", tmp_path, "--image", image_id)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) == 130, output_of(tmp_path, "interrupted")
    rec = job.record()
    assert rec["status"] == "error" and "interrupted" in rec["reason"] and rec["finished_at"]
    assert not leftovers(home, "adhoc"), leftovers(home, "adhoc").describe()
    text = output_of(tmp_path, "interrupted")
    assert "Traceback" not in text and "\x1b[" not in text
    assert job.manifest()[-1]["error"] == "killed-by-signal"


# -- gc after a SIGKILLed orchestrator ---------------------------------------------------------------
def test_gc_removes_what_a_killed_orchestrator_leaked_and_spares_a_live_one(
    image_id: str,
    home: Path,
    tmp_path: Path,
) -> None:
    # With a route out (network = internet): the one network a scripted job on one machine has,
    # which gc must find too.
    dead, dead_job = start_slow(
        home, "orphan", tmp_path, "--image", image_id, "--persistent", "--network", "internet"
    )
    sigkill_group(dead)
    dead_session = docker_client().containers.get(dead_job.record()["container"]).labels[LEASE]
    leaked = labelled("adhoc", {dead_session})
    assert {c.labels[ROLE] for c in leaked.containers} == {"job", "gateway"} and len(leaked.networks) == 1

    live, live_job = start_slow(home, "alive", tmp_path, "--image", image_id)
    live_session = (sessions_of(home, "adhoc") - {dead_session}).pop()
    assert labelled("adhoc", {live_session})

    # another home's gc knows neither orchestrator: it touches nothing
    elsewhere = fb("gc", home=tmp_path / "elsewhere")
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert len(labelled("adhoc", {dead_session}).containers) == 2

    dry = fb("gc", "--dry-run", home=home)
    assert dry.returncode == 0, dry.stderr
    listed = dry.stdout.splitlines()
    assert sorted(line.split()[3] for line in listed) == sorted(
        [c.name for c in leaked.containers]
        + [n.name for n in leaked.networks]
        + [v.name for v in leaked.volumes]
    )
    assert all(line.startswith("would remove ") for line in listed)
    assert labelled("adhoc", {dead_session}).containers, "--dry-run removed something"

    done = fb("gc", home=home)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == len(listed)
    assert not labelled("adhoc", {dead_session}), labelled("adhoc", {dead_session}).describe()
    # the live orchestrator's job is untouched and still running
    spared = labelled("adhoc", {live_session})
    assert {c.labels[ROLE] for c in spared.containers} == {"job", "gateway"} and spared.networks == []
    assert all(c.status == "running" for c in spared.containers) and live.poll() is None
    assert not (home / ".sessions" / f"{dead_session}.lock").exists()
    # the dead run's folders showed its disk: its files are back on the host, the binds undone;
    # the live job's still show its progress
    assert "recovered from the disk of a run whose orchestrator died" in done.stderr
    assert not os.path.ismount(dead_job.root / "runs") and (dead_job.root / "runs" / "lineage.json").exists()
    assert os.path.ismount(live_job.root / "runs")

    # the live job ends normally once stopped; then nothing with our labels is left
    stopped = fb("stop", "alive", "--grace", "2", home=home)
    assert stopped.returncode == 0, stopped.stderr
    assert live.wait(timeout=60) == 3  # stopped from outside: infrastructure
    assert live_job.status() not in ("running", "queued")
    assert not leftovers(home, "adhoc"), leftovers(home, "adhoc").describe()

    # the killed orchestrator's persistent job can still be woken: its conversation continues
    assert dead_job.status() == "running"
    woken = fb("wake", "orphan", home=home)
    assert woken.returncode == 0, woken.stderr
    assert dead_job.status() == "passed" and dead_job.lineage()["woke"] == 2
    assert not leftovers(home, "adhoc"), leftovers(home, "adhoc").describe()
