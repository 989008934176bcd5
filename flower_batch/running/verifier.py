"""A task's hidden tests, run after its workflow (jobmodel/grading.py says what a Verifier is).

The tests never enter the job's container. Once it has ended (every process of it gone) they run
in a fresh container of the job's final state (its committed state image when its root was
writable, else its image) with the workspace mounted where the agent worked: the tests copied to
/tests, an empty host folder at /logs/verifier (so nothing the agent left there counts), the
verifier's env and timeout, `bash /tests/test.sh`. What it wrote there is read as hostile input
(rewards.py); its output is kept in the job's logs/verifier.log.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import anyio

from flower.exitinfo import one_line
from flower_batch.backend.base import Backend, ContainerSpec, Mount
from flower_batch.backend.confinement import hand_over
from flower_batch.errors import FlowerBatchError, RewardUnreadable
from flower_batch.jobmodel.grading import TESTS_PATH, VERIFIER_LOGS, Reward, Verifier
from flower_batch.layout import JobDir
from flower_batch.running.joblog import capped_text
from flower_batch.running.rewards import read_reward
from flower_batch.untrusted_files import copy_tree, remove_tree

COMMAND = ["bash", f"{TESTS_PATH}/test.sh"]
GRACE_S = 10.0


@dataclass(frozen=True)
class Graded:
    """The hidden tests' result: a reward, or why there is none (one line)."""

    reward: Reward | None = None
    error: str | None = None
    output: str | None = None


def folders(jd: JobDir) -> tuple[Path, Path]:
    """(tests, logs): the host folders mounted at /tests and /logs/verifier, made afresh."""
    base = jd.root / "verifier"
    remove_tree(base)  # an earlier grading's, or anything at that name
    tests, logs = base / "tests", base / "logs"
    logs.mkdir(parents=True)
    return tests, logs


def mounts(tests: Path, logs: Path) -> list[Mount]:
    return [Mount(str(tests), TESTS_PATH, read_only=True), Mount(str(logs), VERIFIER_LOGS)]


def staged(verifier: Verifier, jd: JobDir) -> tuple[Path, Path]:
    """The tests copied in and both folders handed to the sandbox uid. Blocking."""
    tests, logs = folders(jd)
    copy_tree(verifier.folder, tests)
    for folder in (tests, logs):
        hand_over(folder)
    return tests, logs


async def run_verifier(
    backend: Backend, spec: ContainerSpec, verifier: Verifier, jd: JobDir, logs: Path
) -> Graded:
    """`spec` (COMMAND in the job's final state, made by the runner) run to its end, and its reward."""
    container = await backend.create(spec)
    try:
        await backend.start(container)
        try:
            code: int | None = await backend.wait(container, timeout=verifier.timeout_s)
            timed_out = False
        except TimeoutError:
            await backend.stop(container, grace_s=GRACE_S)
            code, timed_out = None, True
        output = await capped_text(backend.logs(container))  # the task's tests on the agent's state: capped
    finally:
        with anyio.CancelScope(shield=True):
            try:
                await backend.remove(container, force=True)
            except FlowerBatchError:
                pass
    (jd.logs / "verifier.log").write_text(f"$ {shlex.join(COMMAND)}\n{output}\n[exit {code}]\n")
    if timed_out:
        return Graded(error=f"the hidden tests did not finish in {verifier.timeout_s:g}s", output=output)
    try:
        reward = await anyio.to_thread.run_sync(read_reward, logs)
    except RewardUnreadable as exc:
        return Graded(error=one_line(str(exc)), output=output)
    return Graded(reward=reward, output=output)
