"""One job from start to record, with its gateway: the shared path of `run`, `wake` and `repro`."""

from __future__ import annotations

import re
import secrets
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import anyio

from flower_batch.backend.base import Backend, ImageInfo
from flower_batch.envnames import secret_name_problem, unset_names
from flower_batch.errors import FlowerBatchError, ImageMissing
from flower_batch.gateway.host.sidecar import GatewaySettings, GatewaySidecar
from flower_batch.gateway.host.supervisor import supervisors
from flower_batch.jobmodel import fields
from flower_batch.jobmodel.hashing import file_hash, tree_hash
from flower_batch.jobmodel.modes import GatewayMode
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.spec import GatewaySpec, JobSpec
from flower_batch.jobmodel.status import State
from flower_batch.labels import RELAY_WAITS
from flower_batch.layout import Home, JobDir
from flower_batch.running.lease import Lease
from flower_batch.running.runner import JobContext, run_job
from flower_batch.running.targets import locate

ADHOC_BATCH = "adhoc"
T = TypeVar("T")


def slug(text: str, limit: int = 32) -> str:
    s = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()
    return s[:limit].rstrip("-") or "job"


def option_value(option: str, given: str, parsed: T | fields.Problem) -> T:
    """An option's value checked by its field's validator (jobmodel/fields.py): a problem is one
    line naming the option as given (`--memory 1m: ...`)."""
    if isinstance(parsed, fields.Problem):
        raise FlowerBatchError(f"{option} {given}: {parsed.text}")
    return parsed


def adhoc_spec(
    *,
    workspace: Path,
    task: str | None,
    workflow: str | None,
    prompt: str | None,
    name: str | None,
    timeout: str,
    cpus: float | None,
    memory: str | None,
    env: dict[str, str],
    secrets_: list[str],
    scenario: Path | None,
    budget_usd: float | None = None,
    environ: Mapping[str, str],
    placement: tuple[str, ...] = (),
    pids: int | None = None,
    network: str = "gateway",
) -> JobSpec:
    """The spec of a `run` job, validated before any folder, gateway or container exists.

    `environ` (the command's, read where it started) is where the secrets' values will be read at start.
    """
    _refuse_bad_inputs(workspace, task, workflow, scenario, secrets_, environ)
    budget_usd = (
        None
        if budget_usd is None
        else option_value("--budget-usd", f"{budget_usd:g}", fields.budget_usd(budget_usd))
    )
    cpus = None if cpus is None else option_value("--cpus", f"{cpus:g}", fields.cpus(cpus))
    constraints = tuple(option_value("--placement", repr(c), fields.placement(c)) for c in placement)
    pids = None if pids is None else option_value("--pids", str(pids), fields.pids(pids))
    network = option_value("--network", repr(network), fields.network(network))
    timeout_s = option_value("--timeout", repr(timeout), fields.duration(timeout))
    memory_bytes = option_value("--memory", memory, fields.memory(memory)) if memory else None
    # Hashed as the matrix does: inputs_hash covers the contents, and `repro` sees a drifted source.
    source = workspace.resolve()
    return JobSpec(
        id=name or f"{slug(task or workflow or 'job')}-{secrets.token_hex(2)}",
        task=ADHOC_BATCH,
        variant="default",
        repeat=1,
        matrix={},
        prompt=(task or prompt or ""),
        workflow=workflow,
        workspace=source,
        workspace_hash=tree_hash(source),
        timeout_s=timeout_s,
        cpus=cpus,
        memory_bytes=memory_bytes,
        env=env,
        secrets=tuple(dict.fromkeys(secrets_)),
        gateway=_adhoc_gateway(scenario),
        budget_usd=budget_usd,
        placement=constraints,
        pids=pids,
        network=network,
    )


def _adhoc_gateway(scenario: Path | None) -> GatewaySpec:
    """`--scenario FILE`: the scripted model, its file hashed into the job's inputs; else the API."""
    if scenario is None:
        return GatewaySpec()
    source = scenario.resolve()
    return GatewaySpec(mode=GatewayMode.SCRIPTED, scenario=source, scenario_hash=file_hash(source))


def _refuse_bad_inputs(
    workspace: Path,
    task: str | None,
    workflow: str | None,
    scenario: Path | None,
    secrets_: list[str],
    environ: Mapping[str, str],
) -> None:
    """A `run` job's inputs that are not job fields: the folders and files it names, its
    workflow target, and the secrets it passes (named well, and set in `environ`)."""
    if not workspace.is_dir():
        raise FlowerBatchError(f"workspace {workspace} is not a directory: pass an existing folder to copy")
    if bool(task) == bool(workflow):
        raise FlowerBatchError("give either a task text or --workflow module:attr (not both, not neither)")
    if workflow:
        locate(workflow)  # a bad target is refused before any folder, gateway or container exists
    if scenario is not None and not scenario.is_file():
        raise FlowerBatchError(f"--scenario {scenario}: no such file")
    for secret in secrets_:
        problem = secret_name_problem(secret)
        if problem:
            raise FlowerBatchError(f"--secret {secret}: {problem}")
    missing = unset_names(secrets_, environ)
    if missing:
        raise FlowerBatchError(
            f"--secret {', '.join(missing)}: not set in the environment; export it before running"
        )


# long: its fourteen parameters take seventeen lines; the body is one path, gateway beside the job
async def start_job(
    backend: Backend,
    home: Home,
    batch: str,
    job: JobSpec,
    *,
    image_id: str,
    versions: dict[str, str],
    persistent: bool,
    waking: bool = False,
    wake_words: str | None = None,
    previous: JobRecord | None = None,
    on_state: Callable[[str, State], None] | None = None,
    search: list[Path] | None = None,
    flows_from: Path | None = None,
    settings: GatewaySettings | None = None,
) -> JobRecord:
    """Run one job in its own orchestrator lease with its own gateway. `settings`: the host's
    environment (the secrets' values, the credential) and the gateway's limits, read where the
    process started."""
    settings = GatewaySettings() if settings is None else settings
    jd = home.job(batch, job.id)
    if not waking:
        _make_job_folder(jd, job.gateway.scenario)
    beside = starts_beside(backend, await _require_image(backend, image_id))
    with Lease(home.root) as lease:
        gateway = GatewaySidecar(
            backend,
            batch=batch,
            lease=lease.id,
            image_id=image_id,
            batch_dir=home.batch_dir(batch),
            gateway=job.gateway,
            settings=settings,
        )
        try:
            if not beside:
                await gateway.start()  # its error is the command's (no task group's)
            # Beside: the gateway starts while the job's container does; flower's relay waits for
            # the job's socket to be bound; one that does not start stops the job (start_beside).
            async with supervisors() as supervise, anyio.create_task_group() as tg:
                if beside:
                    tg.start_soon(gateway.start_beside, supervise)  # then restarted if it dies
                else:
                    supervise(gateway)
                ctx = JobContext(
                    backend=backend,
                    batch=batch,
                    lease=lease.id,
                    image_id=image_id,
                    gateway=gateway,
                    versions=versions,
                    on_state=on_state,
                    search=search or [],
                    flows_from=flows_from,
                    environ=settings.environ,
                )
                record = await run_job(
                    ctx,
                    job,
                    jd,
                    persistent=persistent,
                    waking=waking,
                    wake_words=wake_words,
                    previous=previous,
                )
            return record
        finally:
            with anyio.CancelScope(shield=True):
                await gateway.stop()


def starts_beside(backend: Backend, image: ImageInfo) -> bool:
    """Whether a job's container may start while its gateway does: on one machine (the job
    reaches the gateway through a unix socket its flower waits for), with an image whose flower
    waits. On a cluster a job reaches the gateway by name over the network, which nothing waits
    for: the gateway serves first."""
    return backend.shares_unix_sockets and relay_waits(image)


def relay_waits(image: ImageInfo) -> bool:
    """Whether flower in this image waits for its model socket to be bound, so the gateway may
    start while the job's container does. An image from before drops a request made before the
    gateway serves (a wake of an older job): its gateway starts first, as it used to."""
    return image.labels.get(RELAY_WAITS) == "1"


async def _require_image(backend: Backend, image_id: str) -> ImageInfo:
    try:
        return await backend.image_info(image_id)
    except ImageMissing as exc:
        raise FlowerBatchError(f"image {image_id[:19]} is not in the Docker engine: {exc}") from exc


def _make_job_folder(jd: JobDir, scenario: Path | None) -> None:
    jd.root.mkdir(parents=True, exist_ok=True)
    if scenario is not None:
        # Keep the scenario with the job: a later wake or repro uses this copy.
        shutil.copyfile(scenario, jd.root / f"scenario{scenario.suffix}")


def job_scenario(jd: JobDir) -> Path | None:
    found = sorted(jd.root.glob("scenario.*"))
    return found[0] if found else None
