"""`matrix --oracle`: each Harbor task's own solution/solve.sh run instead of a workflow, with no
model (nothing reaches the gateway: $0), then its hidden tests as for any job, so a person checks
the environments and tests before spending money. The solution is copied in at /solution for the
oracle only. One job per task (variants and repeats do not change a solution), in a batch of its
own (`<batch>-oracle`); every task whose oracle did not reach reward 1 is listed, and the exit code
says whether all did."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from flower_batch.jobmodel.hashing import file_hash
from flower_batch.jobmodel.modes import GatewayMode
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.spec import GatewaySpec, JobSpec
from flower_batch.jobmodel.status import Status
from flower_batch.layout import JobDir
from flower_batch.untrusted_files import copy_tree, remove_tree

SOLUTION_PATH = "/solution"
ORACLE_COMMAND = ("bash", f"{SOLUTION_PATH}/solve.sh")
ORACLE_SUFFIX = "-oracle"
ORACLE_REWARD = 1.0
SCENARIO = """description = "matrix --oracle: each task's solution/solve.sh runs; no model is asked"
[[rules]]
name = "none"
reply = "The oracle asks no model."
"""


def oracle_scenario(cache: Path) -> Path:
    """The oracle's gateway's scenario (scripted: no key, no spend), written into `cache`."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / "oracle-scenario.toml"
    if not path.is_file() or path.read_text() != SCENARIO:
        path.write_text(SCENARIO)
    return path


def solution_folder(jd: JobDir) -> Path:
    return jd.root / "solution"


def stage_solution(job: JobSpec, jd: JobDir) -> None:
    """The task's solution/ copied beside the job (mounted read-only at /solution). Blocking."""
    dest = solution_folder(jd)
    remove_tree(dest)
    if job.harbor is None:
        dest.mkdir(parents=True)
        return
    copy_tree(job.harbor.folder / "solution", dest)


@dataclass(frozen=True)
class OracleSet:
    """The oracle's jobs, and the tasks it cannot check (no solution/solve.sh: listed, not run)."""

    jobs: tuple[JobSpec, ...]
    unsolvable: tuple[str, ...]


def oracle_jobs(specs: Iterable[JobSpec], scenario: Path) -> OracleSet:
    """One job per task with hidden tests: named after the task, no workflow, no check, no
    secrets, a scripted gateway on `scenario` (oracle_scenario: nothing is asked of a model, so
    no key is needed), its verifier's pass at ORACLE_REWARD."""
    gateway = GatewaySpec(GatewayMode.SCRIPTED, scenario, file_hash(scenario))
    jobs: dict[str, JobSpec] = {}
    unsolvable: list[str] = []
    for spec in specs:
        if spec.task in jobs or spec.task in unsolvable or spec.verifier is None:
            continue
        if spec.harbor is None or not spec.harbor.has_solution:
            unsolvable.append(spec.task)
            continue
        jobs[spec.task] = replace(
            spec, id=spec.task, variant="oracle", repeat=1, persistent=False, check=None,
            pass_reward=ORACLE_REWARD, workflow=None, prompt=spec.prompt or "oracle",
            gateway=gateway, secrets=(), budget_usd=None,
        )  # fmt: skip
    return OracleSet(tuple(jobs.values()), tuple(unsolvable))


def oracle_failures(records: Sequence[JobRecord]) -> list[str]:
    """One line per task whose oracle did not reach ORACLE_REWARD: its name and why."""
    lines = []
    for record in records:
        if (
            record.status is Status.PASSED
            and record.reward is not None
            and record.reward.value >= ORACLE_REWARD
        ):
            continue
        why = record.reason or "no reason recorded"
        lines.append(
            f"{record.job_id}: {why}" if record.reward else f"{record.job_id}: {record.status.value}: {why}"
        )
    return lines
