"""A job is a sandbox: attacks from inside a job, through the agent's own Bash tool, all fail.

Two batches run at once on the local engine, as CI runs them (the orchestrator as root where CI
is root): batch A has an attacker and a victim, batch B a victim of its own. The attacker's
`attack.py` (project/tasks/attacker) tries the host on every one of its addresses, a neighbour
container, the internet, other jobs' sockets and files, the gateway on the victim's path, and
checks its own privileges; then it leaves hostile output behind (a FIFO, a socket, symlinks out
of the home, more files than the listing shows, odd names, a deep tree, a 24 MB line). The
orchestrator must end the matrix, write the report, cap the log and serve nothing from outside
the job's folder.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from flower_batch.untrusted_files import remove_tree
from flower_batch.workspace_diff import MAX_FILES
from tests.batch_fixtures.rig import fb, fb_start, runtime_image
from tests.batch_fixtures.task_images import DEBIAN13, ensure

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROJECT = Path(__file__).resolve().parent / "project"
MARKER = "victim-secret-4f1c"
ATTACKS = {  # every attack the suite must see fail; the host's addresses are added per machine
    "net-internet",
    "net-interfaces",
    "net-name-gateway",
    "unix-sockets-other-than-own",
    "engine-socket",
    "uid-not-0",
    "capeff-0",
    "capbnd-0",
    "no-new-privs",
    "pids-limited",
    "mknod",
    "rootfs-write",
    "flower-write",
    "read-victim-files",
    "gateway-victim-path-own-token",
    "gateway-victim-path-no-token-get",
    "gateway-victim-path-no-token-bad-json",
    "gateway-made-up-job",
}

JOBS = """
[batch]
name = "{name}"
backend = "{backend}"

[defaults]
timeout = "8m"
gateway = {{ mode = "scripted", scenario = "hostile.toml" }}
"""
TASK = """
[tasks.{role}]
workspace = "tasks/{role}"
workflow = "flows:{role}"
prompt = "go"
"""
# The attacker runs in an image flower-batch did not build (Debian 13, its own python3), flower
# brought in: the sandbox holds there as in the runtime image (the swarm suite attacks from that).
ATTACKER_IMAGE = 'image = "{image}"\n'


def attacks_of(out: Path) -> dict[str, dict]:
    """attack.py's lines, by attack name."""
    found = {}
    for line in out.read_text(errors="replace").splitlines() if out.exists() else []:
        if line.startswith("{"):
            item = json.loads(line)
            found[item["attack"]] = item
    return found


def host_addresses() -> list[str]:
    """Every IPv4 address of this machine's interfaces (docker0, each bridge, eth0, ...)."""
    out = subprocess.run(
        ["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True
    ).stdout
    found = [line.split()[3].split("/")[0] for line in out.splitlines()]
    return [a for a in found if not a.startswith("127.")]


@pytest.fixture(scope="module")
def host_listener() -> Iterator[int]:
    """A service on 0.0.0.0 of the host: what a job must not reach on any address."""
    server = socket.create_server(("0.0.0.0", 0))
    port = server.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(b"host secret\n")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield port
    server.close()


@pytest.fixture(scope="module")
def neighbour() -> Iterator[tuple[str, int]]:
    """A container on Docker's default bridge, listening: another workload of this host."""
    image = runtime_image()
    name = f"fb-hostile-neighbour-{os.getpid()}"
    subprocess.run(
        [
            "docker",
            "run",
            "-d",
            "--rm",
            "--name",
            name,
            image,
            "python3",
            "-c",
            "import socket\ns=socket.create_server(('0.0.0.0',7777))\nwhile 1: s.accept()[0].close()",
        ],
        check=True,
        capture_output=True,
    )
    try:
        ip = subprocess.run(
            ["docker", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        yield ip, 7777
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def make_batch(
    root: Path, name: str, roles: list[str], targets: dict, backend: str = "docker", foreign: bool = False
) -> Path:
    shutil.copytree(PROJECT, root, dirs_exist_ok=True)
    (root / "tasks" / "attacker" / "targets.json").write_text(json.dumps(targets))
    (root / "tasks" / "victim" / "hold-seconds").write_text("45\n")
    path = root / "jobs.toml"
    tasks = "".join(
        TASK.format(role=r) + (ATTACKER_IMAGE.format(image=DEBIAN13) if r == "attacker" and foreign else "")
        for r in roles
    )
    path.write_text(JOBS.format(name=name, backend=backend) + tasks)
    return path


@dataclass
class Ran:
    home: Path
    batch: str
    result: subprocess.CompletedProcess[str]
    attacks: dict[str, dict]
    seconds: float

    def job_dir(self, prefix: str) -> Path:
        return next((self.home / self.batch).glob(f"{prefix}*"))


@pytest.fixture(scope="module")
def ran(
    tmp_path_factory: pytest.TempPathFactory, host_listener: int, neighbour: tuple[str, int]
) -> Iterator[Ran]:
    tmp = tmp_path_factory.mktemp("hostile")
    home = tmp / "home"
    outside = tmp / "outside-the-home.txt"
    outside.write_text("outside secret\n")
    targets = {
        "host_addresses": host_addresses(),
        "host_port": host_listener,
        "other_addresses": [list(neighbour)],
        "victim_marker": MARKER,
        "victim_job": "victim.r1",
        "outside_file": str(outside),
        # past the listing's cap (the viewer and the report must stop there), not 4x past it:
        # writing and removing them was minutes of the suite
        "many_files": MAX_FILES + 5_000,
        "depth": 2000,
    }
    other = make_batch(tmp / "b", "hostile-b", ["victim"], targets)
    second = fb_start("matrix", other, "-j", "1", "--image", runtime_image(), home=home, log=tmp / "b.log")
    try:
        ensure(DEBIAN13)
        jobs = make_batch(tmp / "a", "hostile-a", ["attacker", "victim"], targets, foreign=True)
        started = time.monotonic()
        result = fb(
            "matrix", jobs, "-j", "2", "--image", runtime_image(), "--fail-under", "0", home=home, timeout=900
        )
        seconds = time.monotonic() - started
    finally:
        second.wait(timeout=300)
    attacks = attacks_of(next((home / "hostile-a").glob("attacker*")) / "workspace" / "attack.out")
    yield Ran(home, "hostile-a", result, attacks, seconds)
    remove_tree(home)  # the attacker's 2,000-deep tree: pytest's own cleanup recurses


def test_the_attacker_ran_in_the_foreign_image(ran: Ran) -> None:
    record = json.loads((ran.job_dir("attacker") / "record.json").read_text())
    assert record["spec"]["task_image"]["ref"] == DEBIAN13
    assert "Python 3.13" in (ran.job_dir("attacker") / "workspace" / "attack.out").read_text()


def test_every_attack_from_inside_the_job_fails(ran: Ran) -> None:
    assert ran.attacks, f"the attack did not run: {ran.result.stdout[-2000:]} {ran.result.stderr[-2000:]}"
    wanted = ATTACKS | {f"net-host-{a}" for a in host_addresses()}
    assert wanted <= set(ran.attacks), sorted(wanted - set(ran.attacks))
    open_ = {name: item["detail"] for name, item in ran.attacks.items() if not item["blocked"]}
    assert open_ == {}


def test_the_neighbour_container_is_out_of_reach(ran: Ran, neighbour: tuple[str, int]) -> None:
    assert ran.attacks[f"net-other-{neighbour[0]}:{neighbour[1]}"]["blocked"]


def test_refused_requests_wrote_nothing_into_the_victims_folder(ran: Ran) -> None:
    victim = ran.job_dir("victim")
    log = victim / "logs" / "gateway.jsonl"
    text = log.read_text() if log.exists() else ""
    assert "gateway:bad-token" not in text and "gateway:no-job" not in text
    assert not (ran.home / ran.batch / "made-up-folder").exists()


def test_the_matrix_ended_with_its_report_and_a_capped_log(ran: Ran) -> None:
    assert ran.result.returncode in (0, 1), ran.result.stderr[-2000:]
    assert (ran.home / ran.batch / "report" / "report.html").is_file()
    log = ran.job_dir("attacker") / "logs" / "container.log"
    assert log.stat().st_size < 5 * 1024 * 1024 + 64 * 1024


def test_the_report_and_the_viewer_read_no_further_than_the_job(ran: Ran, tmp_path: Path) -> None:
    workspace = ran.job_dir("attacker") / "workspace"
    if os.getuid() == 0:  # a device node too (a job cannot make one: the test does, as root)
        os.mknod(workspace / "zero-dev", stat.S_IFCHR | 0o666, os.makedev(1, 5))
    again = fb("report", ran.batch, home=ran.home, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    view = fb_start("view", ran.batch, "--port", "0", home=ran.home, log=tmp_path / "view.log")
    try:
        url = _wait_for_url(tmp_path / "view.log")
        job = ran.job_dir("attacker").name
        for path in (f"/api/job?batch={ran.batch}&job={job}", f"/api/diff?batch={ran.batch}&job={job}"):
            with urllib.request.urlopen(url.rstrip("/") + path, timeout=120) as answer:
                body = answer.read().decode("utf-8", "replace")
            assert "root:x:0:0" not in body and "outside secret" not in body
    finally:
        view.terminate()
        view.wait(timeout=30)


def _wait_for_url(log: Path) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for word in log.read_text().split() if log.exists() else []:
            if word.startswith("http://127.0.0.1:"):
                return word
        time.sleep(0.2)
    raise AssertionError(f"the viewer printed no URL: {log.read_text()}")
