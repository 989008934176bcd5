"""A Harbor task and a reward for people: the lines `show`, the report and the viewer print."""

from __future__ import annotations

from typing import Any

from flower_batch.jobmodel.grading import Reward
from flower_batch.jobmodel.spec import JobSpec


def fmt_reward(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def reward_text(reward: Reward, job: JobSpec) -> str:
    """`0.75 (passes at 1.00) · checks_passed 3`: the value, the threshold, reward.json's keys."""
    threshold = f" (passes at {fmt_reward(job.threshold)})" if job.threshold is not None else ""
    detail = " · ".join(f"{key} {value:g}" for key, value in reward.detail.items())
    return f"{fmt_reward(reward.value)}{threshold}" + (f" · {detail}" if detail else "")


def metadata_line(job: JobSpec) -> str | None:
    """`difficulty medium · category logs · tags a, b`, or None: task.toml gave none of them."""
    if job.harbor is None:
        return None
    meta = job.harbor.metadata
    shown = [f"{key} {meta[key]}" for key in ("difficulty", "category") if meta.get(key)]
    tags = meta.get("tags")
    if isinstance(tags, list) and tags:
        shown.append("tags " + ", ".join(str(t) for t in tags))
    return " · ".join(shown) or None


def network_line(job: JobSpec) -> str:
    """`asks public, ran internet`: the policy of the task.toml beside the job's network."""
    asked = job.harbor.network_policy if job.harbor else "-"
    return f"asks {asked}, ran {job.network}"


def harbor_lines(job: JobSpec) -> list[str]:
    """Under a task's name in the report: its metadata, then its digest and network."""
    if job.harbor is None:
        return []
    meta = metadata_line(job)
    return [*([meta] if meta else []), f"{job.harbor.digest[:19]}… · network: {network_line(job)}"]


def harbor_rows(job: JobSpec) -> list[tuple[str, str]]:
    """`show`'s rows for a Harbor task: folder, digest, schema, metadata, network."""
    if job.harbor is None:
        return []
    harbor = job.harbor
    meta = metadata_line(job)
    return [
        ("harbor task", f"{harbor.folder} (schema {harbor.schema_version or 'unstated'})"),
        ("task digest", harbor.digest),
        *([("metadata", meta)] if meta else []),
        ("network", network_line(job)),
    ]


def harbor_facts(job: JobSpec) -> dict[str, Any]:
    """results.json's and the viewer's: the HarborTask, with the network as run and the
    reward the job must reach to pass."""
    assert job.harbor is not None
    return {
        **job.harbor.to_dict(),
        "network_as_run": job.network,
        "pass_reward": job.threshold,
    }
