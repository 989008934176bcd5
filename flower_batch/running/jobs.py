"""A single job's inputs from the command line (`run`), and what a job's start depends on: whether its
gateway may start beside it, and its scenario's copy."""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from flower_batch.backend.base import Backend, ImageInfo
from flower_batch.envnames import secret_name_problem, unset_names
from flower_batch.errors import FlowerBatchError
from flower_batch.jobmodel import fields
from flower_batch.jobmodel.grading import Verifier
from flower_batch.jobmodel.hashing import file_hash, tree_hash
from flower_batch.jobmodel.modes import GatewayMode
from flower_batch.jobmodel.spec import GatewaySpec, JobSpec
from flower_batch.labels import RELAY_WAITS
from flower_batch.layout import JobDir
from flower_batch.running.targets import locate
from flower_batch.workspace_scan import rules_for

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


@dataclass(frozen=True)
class Sandbox:
    """`run --root --user --workdir --tests --pass-reward`, as typed."""

    root: str = "read-only"
    user: str = "sandbox"
    workdir: str | None = None
    tests: Path | None = None
    pass_reward: float | None = None

    def applied(self, spec: JobSpec) -> JobSpec:
        """`spec` with these, each checked by its field's validator (one line each)."""
        root = option_value("--root", repr(self.root), fields.root(self.root))
        user = option_value("--user", repr(self.user), fields.user(self.user))
        workdir = (
            None
            if self.workdir is None
            else option_value("--workdir", repr(self.workdir), fields.workdir(self.workdir))
        )
        verifier = None
        if self.tests is not None:
            folder = self.tests.resolve()
            if not (folder / "test.sh").is_file():
                raise FlowerBatchError(
                    f"--tests {self.tests}: no test.sh in it; give a folder holding test.sh"
                )
            verifier = Verifier(folder=folder, folder_hash=tree_hash(folder))
        if self.pass_reward is not None:
            if verifier is None:
                raise FlowerBatchError(
                    "--pass-reward needs --tests: it is the reward the hidden tests must give"
                )
            option_value("--pass-reward", str(self.pass_reward), fields.pass_reward(self.pass_reward))
        return replace(
            spec, root=root, user=user, workdir=workdir, verifier=verifier, pass_reward=self.pass_reward
        )


# long: every option is checked by its field's one validator, one line each, before the spec is built
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
    persistent: bool = False,
    check: str | None = None,
    exclude: tuple[str, ...] = (),
    workspace_limit: str | None = None,
    home: Path | None = None,
    sandbox: Sandbox = Sandbox(),
    disk: str | None = None,
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
    disk_bytes = option_value("--disk", repr(disk), fields.disk(disk)) if disk is not None else None
    exclude = tuple(option_value("--exclude", repr(p), fields.exclude_pattern(p)) for p in exclude)
    limit = _workspace_limit(workspace_limit)
    if check is not None and not check.strip():
        raise FlowerBatchError("--check is empty: give a shell command, e.g. --check 'python -m pytest -q'")
    # Hashed as the matrix does: inputs_hash covers the contents (what the copy holds: no home,
    # nothing .flowerbatchignore or --exclude leaves out), and `repro` sees a drifted source.
    source = workspace.resolve()
    rules = rules_for(source, exclude, leave_out=() if home is None else (home,))
    spec = JobSpec(
        id=name or f"{slug(task or workflow or 'job')}-{secrets.token_hex(2)}",
        task=ADHOC_BATCH,
        variant="default",
        repeat=1,
        matrix={},
        prompt=(task or prompt or ""),
        workflow=workflow,
        workspace=source,
        workspace_hash=tree_hash(source, rules),
        check=check,
        exclude=exclude,
        workspace_limit=limit,
        timeout_s=timeout_s,
        cpus=cpus,
        memory_bytes=memory_bytes,
        disk=disk_bytes,
        env=env,
        secrets=tuple(dict.fromkeys(secrets_)),
        gateway=_adhoc_gateway(scenario),
        budget_usd=budget_usd,
        placement=constraints,
        pids=pids,
        network=network,
        persistent=persistent,
    )
    return sandbox.applied(spec)


def _workspace_limit(given: str | None) -> int | None:
    if given is None:
        return None
    return option_value("--workspace-limit", repr(given), fields.workspace_limit(given))


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


def job_scenario(jd: JobDir) -> Path | None:
    found = sorted(jd.root.glob("scenario.*"))
    return found[0] if found else None
