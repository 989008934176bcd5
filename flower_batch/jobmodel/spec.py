"""The resolved jobs of a jobs.toml: `JobSpec` (one job) and `JobsFile` (the batch)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..envnames import unset_names
from .environment import BuildRecipe, TaskImage
from .grading import Verifier
from .harbor_task import HarborTask
from .hashing import json_hash
from .modes import DEFAULT_MODE, GatewayMode, missing_need

INPUTS_FORMAT = "flower-batch/inputs@1"
# A Swarm placement constraint: node.labels.K / engine.labels.K / node.hostname|role|id|platform.*
NETWORKS = ("gateway", "internet")
ROOTS = ("read-only", "writable")
"""`root`: the container's root filesystem; "writable" lets the image's package managers work
(its writes bounded, and kept for wake: running/ docs/security.md)."""
RUN_AS = ("sandbox", "root")
"""`user`: the sandbox uid (always, unless a task asks), or uid 0 with the fewest capabilities
package managers need and no-new-privileges (docs/security.md)."""
WORKSPACE_PATH = "/workspace"
WORKDIR_FROM_IMAGE = "image"
"""`workdir = "image"`: the task image's WORKDIR, read from the pinned image at run time (its
config, so the same path on every run and wake); an image without one ("/") works in
WORKSPACE_PATH."""
_RESERVED_WORKDIRS = {
    "/": "the root itself",
    "/tmp": "the job's HOME (a tmpfs)",
    "/runs": "flower's run folder",
    "/flows": "the workflow code",
    "/opt/flower": "flower's runtime",
    "/tests": "where hidden tests are put after the agent",
    "/solution": "where the oracle's solution is put",
    "/logs": "where the verifier writes its reward",
    "/proc": "the kernel's",
    "/sys": "the kernel's",
    "/dev": "the kernel's",
    "/run": "the engine's and the secrets'",
    "/etc": "the system's configuration",
    "/usr": "the system's programs",
    "/bin": "the system's programs",
    "/sbin": "the system's programs",
    "/lib": "the system's libraries",
    "/lib64": "the system's libraries",
    "/var": "the system's state",
    "/boot": "the system's",
}


_WHOLE_TREES = {
    "/tmp",
    "/runs",
    "/flows",
    "/opt/flower",
    "/tests",
    "/solution",
    "/logs",
    "/proc",
    "/sys",
    "/dev",
    "/run",
}
"""Reserved with everything under them (elsewhere only the folder itself: /usr/src/app is fine)."""


def reserved_workdir(path: str) -> str | None:
    """Why `path` (absolute, normalised) cannot hold a job's workspace, or None."""
    for owned, why in _RESERVED_WORKDIRS.items():
        if path == owned or (owned != "/" and path.startswith(owned + "/") and owned in _WHOLE_TREES):
            return why
    return None


MIN_PIDS = 64  # the CLI, flower and a shell already hold about 40 threads
DEFAULT_DISK = 10 * 1024**3
"""What a job may write (its workspace, runs folder, /tmp and its check) when `disk` is not set."""
MIN_DISK = 64 * 1024**2
"""The smallest `disk`: its filesystem's own overhead, flower's runs folder and a small workspace."""

PLACEMENT = re.compile(
    r"^(node\.labels\.[A-Za-z0-9_.-]+|engine\.labels\.[A-Za-z0-9_.-]+|node\.(hostname|role|id|platform\.os"
    r"|platform\.arch))\s*(==|!=)\s*\S+$"
)


@dataclass(frozen=True)
class GatewaySpec:
    """How a job reaches the model. `scenario`/`recording` are absolute host paths."""

    mode: GatewayMode = DEFAULT_MODE
    scenario: Path | None = None
    scenario_hash: str | None = None
    recording: Path | None = None
    recording_hash: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "mode", GatewayMode(self.mode)
        )  # a name from a record: the enum, or ValueError

    @property
    def label(self) -> str:
        return self.mode.label

    def missing(self) -> str | None:
        """What the mode cannot run without and this spec lacks ("scripted mode needs a scenario
        file"), or None: the one check of a mode's need (jobmodel/modes.py)."""
        needs = self.mode.rules.needs
        return missing_need(self.mode, getattr(self, needs) if needs else None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode.value,
            "scenario": str(self.scenario) if self.scenario else None,
            "scenario_hash": self.scenario_hash,
            "recording": str(self.recording) if self.recording else None,
            "recording_hash": self.recording_hash,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GatewaySpec:
        return cls(
            mode=GatewayMode(data.get("mode", DEFAULT_MODE)),
            scenario=Path(data["scenario"]) if data.get("scenario") else None,
            scenario_hash=data.get("scenario_hash"),
            recording=Path(data["recording"]) if data.get("recording") else None,
            recording_hash=data.get("recording_hash"),
        )


@dataclass(frozen=True)
class JobSpec:
    """Everything one job needs, fully resolved. Holds secret NAMES only, never values.

    `workflow` is a `module:attr` target; None means flower's starter flow, which takes
    `prompt` as its task text. `workspace` is the absolute source directory that the
    runner copies fresh for the job (None: start from an empty workspace).
    """

    id: str
    task: str
    variant: str
    repeat: int
    matrix: dict[str, Any]
    prompt: str
    workflow: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    workspace: Path | None = None
    workspace_hash: str | None = None
    check: str | None = None
    check_timeout_s: float = 300.0
    timeout_s: float = 1800.0
    cpus: float | None = None
    memory_bytes: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    gateway: GatewaySpec = field(default_factory=GatewaySpec)
    budget_usd: float | None = None
    placement: tuple[str, ...] = ()
    """Cluster placement constraints; where a job runs, not what it computes (not hashed)."""
    pids: int | None = None
    """Processes and threads the job's container may hold; None: the default (confinement.py)."""
    network: str = "gateway"
    """NETWORKS: "gateway" reaches its model and nothing else; "internet" also gets a route out
    (installing packages), of its own: shown in the record and the report."""
    exclude: tuple[str, ...] = ()
    """Patterns left out of the workspace copy, beside its .flowerbatchignore (workspace_scan.py)."""
    workspace_limit: int | None = None
    """Bytes of workspace a job copies at most; None: the default, 0: no size limit."""
    disk: int | None = None
    """Bytes the job may write (workspace, runs, /tmp, its check's writes): a filesystem of its
    own (running/job_disk.py); None: DEFAULT_DISK."""
    persistent: bool = False
    """Keeps its conversation: a budget pauses it (status `paused`) and a higher cap continues
    the same session (`wake --budget-usd`, `matrix --budget-usd`)."""
    image: str | None = None
    """The task's own image (tag or id) as written; None: the runtime image or `build`."""
    build: BuildRecipe | None = None
    """The task's image built from a folder with a Dockerfile (never together with `image`)."""
    task_image: TaskImage | None = None
    """`image` or `build` resolved to a pinned id before anything runs (running/task_images.py);
    None: the job runs in the batch's runtime image."""
    root: str = "read-only"
    """ROOTS."""
    user: str = "sandbox"
    """RUN_AS."""
    workdir: str | None = None
    """Where the workspace is in the container and the agent works; None: WORKSPACE_PATH. A Harbor
    task's is its image's WORKDIR (the same fixed path on every run and wake)."""
    verifier: Verifier | None = None
    """Hidden tests run after the workflow, whose reward decides the pass (grading.py)."""
    harbor: HarborTask | None = None
    """Where the task came from, when a Harbor task folder (harbor_task.py)."""
    pass_reward: float | None = None
    """`pass_reward` in jobs.toml: the verifier's threshold for this job; None: the verifier's own."""

    @property
    def workspace_path(self) -> str:
        """Where the workspace is in the container, unless `workdir` is the image's (resolved
        at run time: running/job_root.py)."""
        return self.workdir if self.workdir and self.workdir != WORKDIR_FROM_IMAGE else WORKSPACE_PATH

    @property
    def threshold(self) -> float | None:
        """The reward at which the job passes: jobs.toml's `pass_reward`, else its verifier's."""
        if self.verifier is None:
            return None
        return self.pass_reward if self.pass_reward is not None else self.verifier.pass_reward

    @property
    def disk_bytes(self) -> int:
        """The job's disk limit in bytes: its own `disk`, else the default."""
        return self.disk if self.disk is not None else DEFAULT_DISK

    @property
    def uses_starter_flow(self) -> bool:
        return self.workflow is None

    def environment(self, host_env: Mapping[str, str]) -> dict[str, str]:
        """The container's environment: `env` plus each secret's value from `host_env`.

        Call it only when starting the container; never store the result.

        Raises:
            LookupError: a named secret is not set in `host_env`.
        """
        missing = unset_names(self.secrets, host_env)
        if missing:
            raise LookupError(
                f"job {self.id}: secret {', '.join(missing)} not set in the environment; export it before running"
            )
        return {**self.env, **{name: host_env[name] for name in self.secrets}}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, stored in the job record and results.json."""
        return {
            "id": self.id,
            "task": self.task,
            "variant": self.variant,
            "repeat": self.repeat,
            "matrix": self.matrix,
            "prompt": self.prompt,
            "workflow": self.workflow,
            "args": self.args,
            "model": self.model,
            "workspace": str(self.workspace) if self.workspace else None,
            "workspace_hash": self.workspace_hash,
            "check": self.check,
            "check_timeout_s": self.check_timeout_s,
            "timeout_s": self.timeout_s,
            "cpus": self.cpus,
            "memory_bytes": self.memory_bytes,
            "env": self.env,
            "secrets": list(self.secrets),
            "gateway": self.gateway.to_dict(),
            "budget_usd": self.budget_usd,
            **({"placement": list(self.placement)} if self.placement else {}),
            # Only when set: a record written before these fields hashes as it did.
            **({"pids": self.pids} if self.pids is not None else {}),
            **({"network": self.network} if self.network != "gateway" else {}),
            **({"persistent": True} if self.persistent else {}),
            **({"image": self.image} if self.image else {}),
            **({"build": self.build.to_dict()} if self.build else {}),
            **({"task_image": self.task_image.to_dict()} if self.task_image else {}),
            **({"exclude": list(self.exclude)} if self.exclude else {}),
            **({"workspace_limit": self.workspace_limit} if self.workspace_limit is not None else {}),
            **({"root": self.root} if self.root != "read-only" else {}),
            **({"user": self.user} if self.user != "sandbox" else {}),
            **({"workdir": self.workdir} if self.workdir else {}),
            **({"verifier": self.verifier.to_dict()} if self.verifier else {}),
            **({"harbor": self.harbor.to_dict()} if self.harbor else {}),
            **({"pass_reward": self.pass_reward} if self.pass_reward is not None else {}),
            **({"disk": self.disk} if self.disk is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobSpec:
        """Rebuild from `to_dict()` output (e.g. a record.json), to regenerate reports."""
        return cls(
            id=data["id"],
            task=data["task"],
            variant=data.get("variant", "default"),
            repeat=int(data.get("repeat", 1)),
            matrix=dict(data.get("matrix") or {}),
            prompt=data.get("prompt", ""),
            workflow=data.get("workflow"),
            args=dict(data.get("args") or {}),
            model=data.get("model"),
            workspace=Path(data["workspace"]) if data.get("workspace") else None,
            workspace_hash=data.get("workspace_hash"),
            check=data.get("check"),
            check_timeout_s=float(data.get("check_timeout_s", 300.0)),
            timeout_s=float(data.get("timeout_s", 1800.0)),
            cpus=data.get("cpus"),
            memory_bytes=data.get("memory_bytes"),
            env=dict(data.get("env") or {}),
            secrets=tuple(data.get("secrets") or ()),
            gateway=GatewaySpec.from_dict(data.get("gateway") or {}),
            budget_usd=data.get("budget_usd"),
            placement=tuple(data.get("placement") or ()),
            pids=data.get("pids"),
            network=data.get("network") or "gateway",
            persistent=data.get("persistent") is True,
            image=data.get("image"),
            build=BuildRecipe.from_dict(data["build"]) if data.get("build") else None,
            task_image=TaskImage.from_dict(data["task_image"]) if data.get("task_image") else None,
            exclude=tuple(data.get("exclude") or ()),
            workspace_limit=data.get("workspace_limit"),
            root=data.get("root") or "read-only",
            user=data.get("user") or "sandbox",
            workdir=data.get("workdir"),
            verifier=Verifier.from_dict(data["verifier"]) if data.get("verifier") else None,
            harbor=HarborTask.from_dict(data["harbor"]) if data.get("harbor") else None,
            pass_reward=data.get("pass_reward"),
            disk=data.get("disk"),
        )

    def hashed_inputs(self, image_id: str) -> dict[str, Any]:
        """What `inputs_hash` covers: the resolved inputs by content, not by host path."""
        data = self.to_dict()
        data.pop("placement", None)  # where it runs changes no result
        # The workspace's content hash covers what is left out; a limit changes no result.
        data.pop("exclude", None)
        data.pop("workspace_limit", None)
        data["workspace"] = None  # the content hash stands for it; moving the repo changes nothing
        data["gateway"] = {**data["gateway"], "scenario": None, "recording": None}
        if "build" in data:  # the folder's content, not where it lies; its image is that content
            data["build"] = {**data["build"], "folder": None}
            data.get("task_image", {}).pop("id", None)
        data.get("task_image", {}).pop("ref", None)
        data.get("task_image", {}).pop("layered", None)  # where it ran (a cluster's copy), not what
        for moved in ("verifier", "harbor"):  # by content (their hash/digest), not where they lie
            if moved in data:
                data[moved] = {**data[moved], "folder": None}
        return {"format": INPUTS_FORMAT, "image_id": image_id, **data}

    def inputs_hash(self, image_id: str) -> str:
        """sha256 of the resolved inputs, workspace/scenario contents and image id.

        Equal hashes mean a finished result can be kept on resume.
        """
        return json_hash(self.hashed_inputs(image_id))


@dataclass(frozen=True)
class JobsFile:
    """A valid jobs.toml, expanded. `jobs` is in run order (repeat 1 of every job first)."""

    path: Path
    name: str
    image: str | None
    budget_usd: float | None
    tasks: tuple[str, ...]
    variants: tuple[str, ...]
    axes: tuple[str, ...]
    repeat: int
    jobs: tuple[JobSpec, ...]
    descriptions: dict[str, str] = field(default_factory=dict)
    backend: str | None = None
    """[batch] backend: "docker" or "swarm" (None: the flag, FLOWER_BATCH_BACKEND, else docker)."""

    def job(self, job_id: str) -> JobSpec:
        for job in self.jobs:
            if job.id == job_id:
                return job
        raise KeyError(job_id)

    @property
    def gateway_modes(self) -> tuple[GatewayMode, ...]:
        return tuple(dict.fromkeys(job.gateway.mode for job in self.jobs))

    @property
    def secret_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(name for job in self.jobs for name in job.secrets))

    def missing_secrets(self, environ: Mapping[str, str]) -> list[str]:
        """One line per secret named in the file but absent from `environ` (check before running)."""
        return [
            f"{self.path.name}: secret {name} is not set in the environment; export it before running"
            for name in unset_names(self.secret_names, environ)
        ]
