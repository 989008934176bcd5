"""A job's own disk for an orchestrator that is not root, only in the docker group (issue 36): the
real `flower-batch matrix`, run as an unprivileged uid (setpriv: its own uid and gid, the docker
group, no capability), on a 2-job batch whose writer writes past its 64m disk. The helper
container does the root-only steps (running/disk_ops.py). Asserted: the writer ends `disk`, the
reason naming its limit and the file that grew; the neighbour (on its own disk too) passes; the
files copied back are the orchestrator's uid's; nothing is left (no helper, volume, loop
device, mount or disk.img); then `gc` detaches the loop device a killed orchestrator left.

Needs root to become the other uid (CI runs as root), a `docker` group and a Docker socket that
group may use: skipped, with the reason, where there is none.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower_batch.backend.docker.connection import daemon_address
from tests.batch_fixtures.rig import (
    FLOWER_BATCH,
    REPO,
    STARTED,
    Job,
    command_env,
    kill_started,
    leftovers,
    project_copy,
    remove_resources,
    runtime_image,
    sigkill_group,
    wait_for,
)
from tests.flower_batch.running.test_job_disk_on_docker import SCENARIO, WRITER_TASK

pytestmark = [pytest.mark.docker, pytest.mark.slow]

HOME_FS = 500 * 1024**2

JOBS_TOML = """
[batch]
name = "{name}"

[defaults]
workflow = "flows:solo"
prompt = "Read TASK.md and do what it asks."
timeout = "2m"
check_timeout = "30s"
memory = "1g"
disk = "64m"
gateway = {{ mode = "scripted", scenario = "scenarios/disk.toml" }}

[tasks.writer]
workspace = "tasks/writer"

[tasks.alpha]
workspace = "tasks/alpha"
check = "grep -qx alpha answer.txt"
"""
KILLED_TOML = """
[batch]
name = "{name}"

[defaults]
workflow = "flows:solo"
prompt = "Read TASK.md and do what it asks."
timeout = "3m"
memory = "1g"
disk = "64m"
gateway = {{ mode = "scripted", scenario = "scenarios/disk.toml" }}

[tasks.sleeper]
workspace = "tasks/pause"
"""


def docker_group_user() -> tuple[int, int]:
    """(a free uid, the docker group's gid), or the test is skipped saying why."""
    if os.getuid() != 0:
        pytest.skip("becoming an unprivileged uid needs root (CI runs as root)")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    try:
        gid = grp.getgrnam("docker").gr_gid
    except KeyError:
        pytest.skip("this machine has no docker group")
    address = daemon_address()
    if not address.startswith("unix://"):
        pytest.skip(f"the engine is not on a local socket ({address})")
    sock = os.stat(address.removeprefix("unix://"))
    if sock.st_gid != gid or sock.st_mode & (stat.S_IRGRP | stat.S_IWGRP) != stat.S_IRGRP | stat.S_IWGRP:
        pytest.skip(f"the Docker socket {address} is not read-write for the docker group")
    uid = next(u for u in range(4242, 5242) if not _exists(u))
    return uid, gid


def _exists(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


@pytest.fixture
def as_user(tmp_path: Path) -> Iterator[tuple[int, int, Path]]:
    """(uid, docker gid, a folder of that uid's for its home and project): on a filesystem of its
    own (a loop device), so a writer that got no limit fills that and nothing else."""
    uid, gid = docker_group_user()
    image = tmp_path / "root.img"
    with open(image, "wb") as f:
        f.truncate(HOME_FS)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True)
    root = Path(tempfile.mkdtemp(prefix="fb-not-root-"))  # /tmp: tmp_path is root's alone (0700)
    subprocess.run(["mount", "-o", "loop", str(image), str(root)], check=True)
    try:
        os.chown(root, uid, uid)
        yield uid, gid, root
    finally:
        kill_started()
        home = root / "home"
        for batch in [p.name for p in home.iterdir() if p.is_dir()] if home.is_dir() else []:
            remove_resources(leftovers(home, batch))
        for line in _loops().splitlines():  # a failed test's loop devices, on files of root's
            loop, _, backing = line.strip().partition(" ")
            if backing.strip().startswith(f"{root}/"):
                subprocess.run(["losetup", "-d", loop], check=False)
        subprocess.run(["umount", "-l", str(root)], check=False)
        root.rmdir()
        for folder in _helper_folders(uid):  # a killed run's helper leaves its empty folder
            shutil.rmtree(folder, ignore_errors=True)


def _read_search() -> list[str]:
    """setpriv's options for a checkout other users cannot reach (a clone under a 0700 folder:
    mktemp's, root's home): only CAP_DAC_READ_SEARCH, so the uid can read the venv and sources.
    It bypasses read checks only: no mount, no loop device, no write; the disk's steps still need
    the helper."""
    if all(folder.stat().st_mode & stat.S_IXOTH for folder in [REPO, *REPO.parents]):
        return ["--inh-caps=-all"]
    return ["--inh-caps=-all,+dac_read_search", "--ambient-caps=+dac_read_search"]


def as_uid(uid: int, gid: int, root: Path, *args: str) -> tuple[list[str], dict[str, str]]:
    """`flower-batch ARGS --home <root>/home` as `uid` in the docker group, with no capability
    (but reading, where the checkout is out of other users' reach: `_read_search`)."""
    command = ["setpriv", f"--reuid={uid}", f"--regid={uid}", f"--groups={gid}", *_read_search(), "--"]
    return [*command, str(FLOWER_BATCH), *args, "--home", str(root / "home")], {
        **command_env(),
        "HOME": str(root / "user"),
    }


def fb_as(
    uid: int, gid: int, root: Path, *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    command, env = as_uid(uid, gid, root, *args)
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=root / "project", env=env
    )


def chown_tree(root: Path, uid: int) -> None:
    for folder, dirs, files in os.walk(root):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.lchown(name, uid, uid)


def test_a_docker_group_user_gets_a_jobs_own_disk_through_the_helper(as_user: tuple[int, int, Path]) -> None:
    uid, gid, root = as_user
    image = runtime_image()
    project = project_copy(root / "project")
    (project / "tasks" / "writer").mkdir()
    (project / "tasks" / "writer" / "TASK.md").write_text(WRITER_TASK)
    (project / "scenarios" / "disk.toml").write_text(SCENARIO)
    name = f"fb36-not-root-{os.getpid()}"
    (project / "jobs.toml").write_text(JOBS_TOML.format(name=name))
    (root / "home").mkdir()
    (root / "user").mkdir()
    chown_tree(root, uid)

    done = fb_as(uid, gid, root, "matrix", "jobs.toml", "-j", "2", "--image", image, "--reserve", "64m")
    out = done.stdout + done.stderr
    assert "Traceback" not in out, out
    assert "without a disk limit" not in out, out  # the helper did what root would
    batch = root / "home" / name
    records = {p.parent.name: json.loads(p.read_text()) for p in batch.glob("*/record.json")}
    writer, alpha = records["writer.r1"], records["alpha.r1"]
    assert (writer["status"], writer["class"]) == ("disk", "disk"), writer
    assert 'limit of 64m (disk = "64m")' in writer["reason"] and "workspace/big.bin" in writer["reason"], (
        writer
    )
    assert alpha["status"] == "passed", alpha
    assert done.returncode == 1, out  # not all passed; no infrastructure error (3)
    # the writer's files came back, bounded by its disk, and are the orchestrator's uid's
    big = batch / "writer.r1" / "workspace" / "big.bin"
    assert 30 * 1024**2 < big.stat().st_size <= 64 * 1024**2
    for path in [big, big.parent, batch / "alpha.r1" / "workspace" / "answer.txt"]:
        assert path.stat().st_uid == uid, path
    # nothing of the disks or their helper is left
    assert not list(batch.glob("*/disk.img"))
    assert not leftovers(root / "home", name), leftovers(root / "home", name).describe()
    assert str(batch) not in _loops()
    assert f"{root}/" not in _mounts()  # no bind, no read-back mount (the home's own fs is at root)
    assert not _helper_folders(uid)  # the helper's socket and its folder went with it

    # An orchestrator killed while its job runs (its folders showing its disk): `gc`, as the same
    # user, gets the job's files back, undoes the binds and detaches the loop device it left.
    (project / "tasks" / "pause").mkdir()
    (project / "tasks" / "pause" / "TASK.md").write_text("# PAUSE-TASK\n\nThink, then write alpha.\n")
    killed = f"fb36-killed-{os.getpid()}"
    (project / "killed.toml").write_text(KILLED_TOML.format(name=killed))
    chown_tree(project, uid)
    command = ("matrix", "killed.toml", "--image", image, "--reserve", "64m")
    job = Job(root / "home", killed, "sleeper.r1")
    killed_while_shown_live(uid, gid, root, job, command)
    assert str(job.root) in _loops()  # what only gc can let go of now
    swept = fb_as(uid, gid, root, "gc", timeout=120)
    text = swept.stdout + swept.stderr
    assert swept.returncode == 0 and "Traceback" not in text, text
    assert "sleeper.r1: its files recovered" in text and "detached loop device" in text, text
    assert f"{root}/" not in _mounts() and str(batch.parent) not in _loops()
    task = job.root / "workspace" / "TASK.md"
    assert task.read_text().startswith("# PAUSE-TASK") and task.stat().st_uid == uid
    assert not leftovers(root / "home", killed), leftovers(root / "home", killed).describe()

    # Killed again, and this time the same command runs it again, with no gc: the new run gets
    # the killed one's files back (kept as attempt 2) and lets go of its loop device itself.
    killed_while_shown_live(uid, gid, root, job, command)
    (project / "tasks" / "pause" / "TASK.md").write_text("# PAUSE-TASK, WOKEN\n\nWrite alpha.\n")
    again = fb_as(uid, gid, root, *command, timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    assert job.record()["status"] == "passed" and job.record()["attempt"] == 3, job.record()
    kept = job.root / "attempts" / "2" / "workspace" / "TASK.md"
    assert kept.read_text().startswith("# PAUSE-TASK\n"), kept
    assert f"{root}/" not in _mounts() and str(batch.parent) not in _loops()
    assert not leftovers(root / "home", killed), leftovers(root / "home", killed).describe()
    # the killed runs' helpers went with them, their sockets too (the live runs': at their end)
    wait_for("the helpers' sockets gone", lambda: not _helper_folders(uid, "*/helper.sock"), timeout=10)


def _helper_folders(uid: int, pattern: str = "*") -> list[Path]:
    """What the disk helpers of `uid` made in /tmp: their sockets' folders (0700, that uid's)."""
    tmp = Path(tempfile.gettempdir())
    return [p for p in tmp.glob(f"flower-batch-disk-helper-{pattern}") if p.lstat().st_uid == uid]


def killed_while_shown_live(uid: int, gid: int, root: Path, job: Job, args: tuple[str, ...]) -> None:
    """`flower-batch ARGS` as `uid` in the background, SIGKILLed once `job`'s folders show its disk."""
    command, env = as_uid(uid, gid, root, *args)
    with open(root / "killed.log", "w") as log:
        proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=root / "project",
            env=env,
            start_new_session=True,
            text=True,
        )
    STARTED.append(proc)
    # the model's second answer takes a minute: the job is at work, its folders showing its disk
    wait_for("its folders shown live", lambda: str(job.root / "workspace") in _mounts(), timeout=120)
    sigkill_group(proc)
    STARTED.remove(proc)


def _mounts() -> str:
    return Path("/proc/self/mountinfo").read_text()


def _loops() -> str:
    """`<device> <backing file>` of every loop device, a line each."""
    return subprocess.run(
        ["losetup", "-l", "-n", "-O", "NAME,BACK-FILE"], capture_output=True, text=True
    ).stdout
