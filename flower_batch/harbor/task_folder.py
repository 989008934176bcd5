"""One Harbor task folder read and mapped onto job fields (docs/harbor-tasks.md has the table).

    instruction.md                     the prompt
    environment/Dockerfile             `build` (the folder environment/), or
    [environment] docker_image         `image` (prebuilt; it wins over a Dockerfile, as in Harbor)
    [agent] timeout_sec                `timeout`
    [agent] user = "root"              user "root" (uid 0 in the sandbox), else the sandbox user
    [environment] cpus, memory_mb      `cpus`, `memory`
    [environment] storage_mb           `disk` (at least the smallest disk a job can have, 64 MiB)
    [environment] allow_internet /     network "internet" for public, the default for no-network;
      network_mode                     an allowlist is refused (not honoured yet)
    [verifier] timeout_sec, env        the job's Verifier on tests/ (run after the agent)
    [task], [metadata]                 kept in the record and the report (HarborTask.metadata)

Every problem is one HarborTaskError line naming the file and the fix. Nothing is built here.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flower_batch.errors import HarborTaskError
from flower_batch.jobmodel.grading import Verifier
from flower_batch.jobmodel.harbor_task import HarborTask
from flower_batch.jobmodel.hashing import tree_hashes
from flower_batch.jobmodel.spec import MIN_DISK

SCHEMA_VERSIONS = re.compile(r"^1\.[0-4](\.\d+)?$")
"""The task.toml versions read: 1.0 (Terminal-Bench 2's) to 1.4; a later one may mean more."""
IMAGE_WORKDIR = "image"
"""`workdir` of a Harbor task: the image's own WORKDIR, found when the image is built (running/)."""
MAX_INSTRUCTION = 1 << 20
_MB = 1024 * 1024
_COMPOSE = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True)
class TaskFolder:
    """What a task folder says about its jobs; jobs.toml's layers may override each field."""

    name: str
    prompt: str
    image: str | None
    build_dir: Path | None
    """environment/, when the task builds its image from environment/Dockerfile."""
    build_hash: str | None
    timeout_s: float | None
    cpus: float | None
    memory_bytes: int | None
    disk_bytes: int | None
    network: str
    """"internet" when the task allows it, else "gateway" (the model only)."""
    user: str
    verifier: Verifier
    harbor: HarborTask
    description: str | None = None


def task_name(folder: Path) -> str:
    """The task's name in job ids: the folder's name, made of letters, digits, - and _."""
    return _NOT_NAME.sub("-", folder.name).strip("-") or "task"


def read_task(folder: Path) -> TaskFolder:
    """Read the Harbor task folder at `folder` (absolute).

    Raises:
        HarborTaskError: one line naming the file and what to fix.
    """
    config = _task_toml(folder)
    version = _schema_version(folder, config)
    environment = _table(folder, config, "environment")
    agent = _table(folder, config, "agent")
    image, build_dir = _environment(folder, environment)
    policy, network = _network(folder, environment)
    hashes = tree_hashes(folder, ("tests", "environment"))  # one walk of the folder
    metadata = _metadata(folder, config)
    harbor = HarborTask(
        folder=folder,
        digest=hashes[""],
        name=task_name(folder),
        schema_version=version,
        metadata=metadata,
        has_solution=(folder / "solution" / "solve.sh").is_file(),
        network_policy=policy,
    )
    description = metadata.get("description")
    return TaskFolder(
        name=harbor.name,
        prompt=_instruction(folder),
        image=image,
        build_dir=build_dir,
        build_hash=hashes.get("environment") if build_dir else None,
        timeout_s=_number(folder, agent, "timeout_sec", "agent"),
        cpus=_number(folder, environment, "cpus", "environment"),
        memory_bytes=_megabytes(folder, environment, "memory_mb"),
        disk_bytes=_disk(folder, environment),
        network=network,
        user=_user(folder, agent),
        verifier=_verifier(folder, _table(folder, config, "verifier"), hashes.get("tests", "")),
        harbor=harbor,
        description=description if isinstance(description, str) else None,
    )


def _task_toml(folder: Path) -> Mapping[str, Any]:
    path = folder / "task.toml"
    if not path.is_file():
        raise HarborTaskError(f"{path}: not found; a Harbor task folder holds task.toml and instruction.md")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise HarborTaskError(f"{path}: cannot be read ({exc}); fix its permissions or encoding") from None
    except tomllib.TOMLDecodeError as exc:
        raise HarborTaskError(f"{path}: not valid TOML ({exc}); fix the file") from None


def _schema_version(folder: Path, config: Mapping[str, Any]) -> str | None:
    raw = config.get("schema_version", config.get("version"))
    if raw is None:
        return None
    text = str(raw)
    if isinstance(raw, bool) or not isinstance(raw, str | int | float) or not SCHEMA_VERSIONS.match(text):
        raise HarborTaskError(
            f'{folder / "task.toml"}: schema_version "{text[:40]}" is not one flower-batch reads '
            "(1.0 to 1.4); write a known version, or check the task against docs/harbor-tasks.md"
        )
    return text


def _table(folder: Path, config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = config.get(name, {})
    if not isinstance(value, Mapping):
        raise HarborTaskError(
            f"{folder / 'task.toml'}: [{name}] is not a table; write it as a [{name}] section"
        )
    return value


def _instruction(folder: Path) -> str:
    path = folder / "instruction.md"
    if not path.is_file():
        raise HarborTaskError(f"{path}: not found; a Harbor task's prompt is its instruction.md")
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_INSTRUCTION + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HarborTaskError(f"{path}: cannot be read ({exc}); write it as UTF-8 text") from None
    if len(data) > MAX_INSTRUCTION:
        raise HarborTaskError(f"{path}: larger than 1 MiB; a prompt that long is not one a model reads")
    if not text.strip():
        raise HarborTaskError(f"{path}: is empty; write the task's instruction in it")
    return text


def _environment(folder: Path, environment: Mapping[str, Any]) -> tuple[str | None, Path | None]:
    """(image, None) for a prebuilt docker_image, (None, environment/) for a Dockerfile."""
    env_dir = folder / "environment"
    compose = next((name for name in _COMPOSE if (env_dir / name).is_file()), None)
    if compose:
        raise HarborTaskError(
            f"{env_dir / compose}: docker-compose environments are not honoured yet; give the task "
            "an environment/Dockerfile (or [environment] docker_image) for its main service"
        )
    image = environment.get("docker_image")
    if image is not None:
        if not isinstance(image, str) or not image.strip():
            raise HarborTaskError(
                f'{folder / "task.toml"}: [environment] docker_image must be an image name like "debian:12"'
            )
        return image.strip(), None
    if not (env_dir / "Dockerfile").is_file():
        raise HarborTaskError(
            f"{env_dir / 'Dockerfile'}: not found; a task needs environment/Dockerfile or "
            "[environment] docker_image in task.toml"
        )
    return None, env_dir.resolve()


def _network(folder: Path, environment: Mapping[str, Any]) -> tuple[str, str]:
    """(the policy as asked, the job's network): public -> internet, no-network -> gateway."""
    where = folder / "task.toml"
    mode = environment.get("network_mode")
    allow = environment.get("allow_internet")
    if allow is not None and not isinstance(allow, bool):
        raise HarborTaskError(f"{where}: [environment] allow_internet must be true or false")
    if mode is None:
        return ("public", "internet") if allow else ("no-network", "gateway")
    if mode == "public":
        return "public", "internet"
    if mode == "no-network":
        return "no-network", "gateway"
    if mode == "allowlist":
        raise HarborTaskError(
            f'{where}: [environment] network_mode "allowlist" is not honoured yet (flower-batch gives '
            'a job no network or the internet); write network_mode = "public" to allow the internet'
        )
    raise HarborTaskError(
        f'{where}: [environment] network_mode must be "public", "no-network" or "allowlist", got {str(mode)[:40]!r}'
    )


def _number(folder: Path, table: Mapping[str, Any], key: str, section: str) -> float | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise HarborTaskError(f"{folder / 'task.toml'}: [{section}] {key} must be a positive number")
    return float(value)


def _megabytes(folder: Path, environment: Mapping[str, Any], key: str) -> int | None:
    value = _number(folder, environment, key, "environment")
    return None if value is None else int(value * _MB)


def _disk(folder: Path, environment: Mapping[str, Any]) -> int | None:
    """storage_mb as the job's own disk; a task asking for less than the smallest disk a job can
    have gets that (a filesystem has a floor; the task gets at least what it asked)."""
    size = _megabytes(folder, environment, "storage_mb")
    return None if size is None else max(size, MIN_DISK)


def _user(folder: Path, agent: Mapping[str, Any]) -> str:
    user = agent.get("user")
    if user is None:
        return "sandbox"
    if user in ("root", 0, "0"):
        return "root"
    raise HarborTaskError(
        f"{folder / 'task.toml'}: [agent] user {str(user)[:40]!r} is not honoured; flower-batch runs a "
        'task as its sandbox user, or as uid 0 with user = "root"'
    )


def _verifier(folder: Path, section: Mapping[str, Any], tests_hash: str) -> Verifier:
    tests = folder / "tests"
    if not (tests / "test.sh").is_file():
        raise HarborTaskError(f"{tests / 'test.sh'}: not found; a Harbor task is graded by tests/test.sh")
    env = section.get("env", {})
    if not isinstance(env, Mapping) or not all(isinstance(v, str | int | float) for v in env.values()):
        raise HarborTaskError(f'{folder / "task.toml"}: [verifier] env must be a table of NAME = "value"')
    timeout = _number(folder, section, "timeout_sec", "verifier")
    return Verifier(
        folder=tests.resolve(),
        folder_hash=tests_hash,
        timeout_s=timeout if timeout is not None else 600.0,
        env={str(k): str(v) for k, v in env.items()},
    )


def _metadata(folder: Path, config: Mapping[str, Any]) -> dict[str, Any]:
    """[metadata] as written, and [task]'s name and description."""
    task = _table(folder, config, "task")
    metadata = dict(_table(folder, config, "metadata"))
    for key in ("name", "description"):
        if isinstance(task.get(key), str):
            metadata.setdefault(key, task[key])
    return {k: v for k, v in metadata.items() if _plain(v)}


def _plain(value: Any) -> bool:
    """JSON-ready (the record is JSON): TOML dates and times are left out."""
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, Mapping):
        return all(_plain(v) for v in value.values())
    return isinstance(value, str | int | float | bool)
