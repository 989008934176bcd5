"""What a run of jobs is given: `BatchPlan`, the one value `matrix`, `run`, `wake` and `repro`
hand to the one path that runs jobs (batch.run_batch -> scheduler.run_jobs -> runner.run_job).
A single job is a batch of one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from flower_batch.gateway.host.sidecar import GatewaySettings
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.layout import Home


@dataclass(frozen=True)
class BatchPlan:
    """What to run: the jobs (each with its previous record, if any), on which image, how."""

    home: Home
    batch: str
    jobs: Sequence[tuple[JobSpec, JobRecord | None]]
    image: PinnedImage
    parallel: int = 1
    infra_retries: int = 0
    search: Sequence[Path] = ()
    """Where workflow modules are looked up (a jobs file's folder)."""
    budget_usd: float | None = None
    """The batch's cap (its gateways refuse requests once the batch's spend reaches it)."""
    settings: GatewaySettings = field(default_factory=GatewaySettings)
    """The host's environment (secrets' values, the credential) and the gateways' limits."""
    wake: frozenset[str] = frozenset()
    """Paused (or left running) jobs continued in their sessions: `wake`, or matrix's resume."""
    wake_words: Mapping[str, str] = field(default_factory=dict)
    """Words a person added to a woken job (`wake JOB "words"`), by job id."""
    wake_waits_for_gateway: bool = True
    """A woken job's container starts once its gateway serves, so that a gateway that does not
    start leaves the job paused, its session untouched (matrix's resume of paused jobs). False
    (`wake` of one job): it starts beside its gateway, as a cold run does, as fast to its first
    request; a gateway that does not start then ends it `error` with the reason, as any job."""
    flows_from: Path | None = None
    """repro: the original job's copy of its workflow code."""
    oracle: bool = False
    """`matrix --oracle`: each job runs its task's solution, not a workflow (running/oracle.py)."""
    reserve: int | None = None
    """Bytes kept free on the home's disk: under them no job starts (running/home_space.py);
    None: the default for `parallel` jobs."""
    bundle: str | None = None
    """The runtime bundle's volume, for the jobs whose task has its own image (running/task_images.py)."""
