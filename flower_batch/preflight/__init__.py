"""Pre-flight: everything a run needs is checked before any job folder, record or container exists.

    pf = Preflight(describe)            describe(field, value, jobs) names where a value came from
    pf.add_jobs(jobs, search=...)       host-side: scenarios (the gateway's parser), limits,
                                        workflow files located
    pf.problems                         one line per problem so far (static: no Docker needed)
    await pf.check_engine(backend, image_id)   `docker info` limits + ONE container importing
                                        every distinct workflow target in the pinned image
    pf.raise_if_any()                   PreflightFailed(lines)

`matrix`, `run`, `wake` and `repro` call it; any problem means exit 2 and nothing on disk changed.

    scenarios     every scenario and recording a run would serve, read by the gateway's own code
    limits        --cpus / --memory against what Docker accepts and the host has
    imports       every workflow target imported in ONE container of the pinned image
    import_cache  the targets already seen to load in an image, not imported again
    include_keys  did-you-mean warnings for `include` keys that name no axis
    workspaces    every workspace a run copies: its size and bounds, what it would skip
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from flower_batch.backend.base import Backend
from flower_batch.backend.docker.engine import EngineFacts, engine_facts
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.units import format_memory

from ..errors import FlowerBatchError, PreflightFailed
from ..jobmodel.classes import EXIT_INFRASTRUCTURE
from ..labels import BATCH, MANAGED, ROLE
from .imports import Target, TargetsSeen, host_target, import_problems
from .limits import cpus_problem, memory_problem, memory_warning
from .scenarios import recording_problems, scenario_problems
from .workspaces import workspace_findings

Describe = Callable[[str, str, Sequence[JobSpec]], str]

__all__ = ["Describe", "Preflight"]


def _grouped(jobs: Sequence[JobSpec], key: Callable[[JobSpec], object]) -> dict[object, list[JobSpec]]:
    groups: dict[object, list[JobSpec]] = {}
    for job in jobs:
        value = key(job)
        if value is not None:
            groups.setdefault(value, []).append(job)
    return groups


class Preflight:
    def __init__(self, describe: Describe, *, batch: str = "preflight") -> None:
        self.describe = describe
        self.batch = batch
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self.targets: list[Target] = []
        self._jobs: list[JobSpec] = []

    def add_jobs(
        self, jobs: Sequence[JobSpec], *, search: Sequence[Path] = (), flows_dir: Path | None = None
    ) -> None:
        """Host-side checks of these jobs. `flows_dir`: their workflow is that existing copy
        (wake, repro), not a file to find on the search path."""
        self._jobs += jobs
        scenarios = [
            j.gateway.scenario for j in jobs if j.gateway.mode.rules.gateways_file and j.gateway.scenario
        ]
        self.problems += scenario_problems(p for p in scenarios if p is not None)
        self.problems += recording_problems(
            j.gateway.recording for j in jobs if j.gateway.mode.rules.replays and j.gateway.recording
        )
        self._limits(jobs, None)
        for target, users in _grouped(jobs, lambda j: j.workflow).items():
            written = str(target)
            label = self.describe("workflow", written, users)
            if flows_dir is not None and not flows_dir.is_dir():
                self.problems.append(f"{label}: the job's copy of its workflow code ({flows_dir}) is missing")
                continue
            if flows_dir is not None:
                self.targets.append(Target(written=written, label=label, flows_dir=flows_dir))
                continue
            found, problem = host_target(written, label, search)
            if problem:
                self.problems.append(problem)
            elif found:
                self.targets.append(found)

    def add_workspaces(
        self, jobs: Sequence[JobSpec], home: Path | None, *, fix: str, home_given: bool = False
    ) -> None:
        """The workspaces these jobs copy fresh (workspaces.py); `fix`: how to allow a larger one;
        `home_given`: the home was named (--home, $FLOWER_BATCH_HOME), not the default."""
        found = workspace_findings(jobs, home, fix=fix, home_given=home_given)
        self.problems += found.problems
        self.warnings += found.warnings

    def _limits(self, jobs: Sequence[JobSpec], facts: EngineFacts | None) -> None:
        for users in _grouped(jobs, lambda j: j.memory_bytes).values():
            where = self.describe("memory", format_memory(users[0].memory_bytes), users)
            problem = memory_problem(users[0].memory_bytes, facts)
            if problem:
                self.problems.append(f"{where}: {problem}")
            warning = memory_warning(users[0].memory_bytes, facts)
            if warning:
                self.warnings.append(f"{where}: {warning}")
        for users in _grouped(jobs, lambda j: j.cpus).values():
            problem = cpus_problem(users[0].cpus, facts)
            if problem:
                self.problems.append(f"{self.describe('cpus', f'{users[0].cpus:g}', users)}: {problem}")

    async def check_engine(
        self,
        backend: Backend,
        image_id: str,
        *,
        facts: EngineFacts | None = None,
        scratch: Path | None = None,
        seen: TargetsSeen | None = None,
    ) -> None:
        """The checks that need the engine: limits against its host, imports in its image
        (`seen`: the targets already seen to load there, skipped)."""
        try:
            facts = facts or engine_facts()
        except FlowerBatchError as exc:
            if exc.exit_code == EXIT_INFRASTRUCTURE:
                raise  # no engine to check against: no verdict on the jobs either (exit 3)
            self.problems.append(" ".join(str(exc).split()))
            return
        self._limits(self._jobs, facts)
        # The static pass already reported what needs no engine: keep each line once.
        self.problems = list(dict.fromkeys(self.problems))
        self.warnings = list(dict.fromkeys(self.warnings))
        labels = {MANAGED: "1", BATCH: self.batch, ROLE: "preflight"}
        try:
            self.problems += await import_problems(
                backend, image_id, self.targets, labels=labels, scratch=scratch, seen=seen
            )
        except FlowerBatchError as exc:
            self.problems.append(f"the workflow import check could not run: {' '.join(str(exc).split())}")

    async def check_cluster(self, backend: Backend, image_id: str) -> None:
        """A cluster's own checks, from its nodes: the image pushed where they pull it, the home
        the same storage on every one of them (backend.check_ready), and each size of job one
        node could hold (backend.reservation_problem)."""
        try:
            await backend.check_ready(image_id, labels={MANAGED: "1", BATCH: self.batch, ROLE: "preflight"})
        except FlowerBatchError as exc:
            self.problems.append(" ".join(str(exc).split()))
        for users in _grouped(self._jobs, lambda j: (j.cpus, j.memory_bytes, tuple(j.placement))).values():
            job = users[0]
            try:
                why = await backend.reservation_problem(job.cpus, job.memory_bytes, list(job.placement))
            except FlowerBatchError as exc:
                self.problems.append(" ".join(str(exc).split()))
                return
            if why:
                where = (
                    self.describe("memory", format_memory(job.memory_bytes), users)
                    if job.memory_bytes
                    else self.describe("cpus", f"{job.cpus:g}", users)
                )
                self.problems.append(f"{where}: no node of the cluster can hold it: {why}")

    def raise_if_any(self) -> None:
        if self.problems:
            raise PreflightFailed(list(dict.fromkeys(self.problems)))
