"""`flower-batch repro <job>`: run a recorded job again in a clean container, then compare.

The reproduction is a new job in the `repro` batch, made from the original's record: the same
image id, a fresh copy of the original workspace source, the original's own copy of its
workflow code (`flows/`), the same prompt, args, model and limits, secrets from the host's
environment only. By default its gateway replays the original's recording (deterministic,
nothing billed, tools really run); `--live` calls the model the original used instead.

It refuses when the image id, the claude-agent-sdk version or the CLI version differ from the
record (or the workspace source changed since), unless told `--allow-drift`. Afterwards the
two manifests are compared side by side: steps, ok, verdicts, tool calls (names and inputs) and
the files each run left changed in its workspace.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from flower.catalogue.readback import VERDICT_HINT, VERDICT_NO_CONCLUSION
from flower_batch.errors import ImageMissing, ReproError
from flower_batch.gateway.recording import read_state, recording_source
from flower_batch.jobmodel.hashing import tree_hash
from flower_batch.jobmodel.image import PinnedImage
from flower_batch.jobmodel.modes import GatewayMode
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.spec import GatewaySpec, JobSpec
from flower_batch.layout import Home, JobDir, check_name
from flower_batch.untrusted_files import MAX_ENTRIES, copy_tree, open_file, shown, walk
from flower_batch.workspace_scan import rules_for

REPRO_BATCH = "repro"
REPORT = "repro.json"


@dataclass
class ReproPlan:
    original: JobDir
    record: JobRecord
    spec: JobSpec
    image: PinnedImage
    mode: GatewayMode
    flows_from: Path | None
    drift: list[str] = field(default_factory=list)


def new_job_id(home: Home, record: JobRecord) -> str:
    """`<batch>.<job>.r<n>`: the n-th reproduction of that job (folder-safe, at most 100 chars)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{record.batch}.{record.job_id}")[:90].strip(".-") or "job"
    n = 1
    while home.job(REPRO_BATCH, f"{base}.r{n}").root.exists():
        n += 1
    return check_name("job", f"{base}.r{n}")


def drift_between(record: JobRecord, image: PinnedImage, spec: JobSpec) -> list[str]:
    """What differs from the record: image id, SDK and CLI versions, the workspace source."""
    image_id, versions = image.id, image.versions
    drift: list[str] = []
    if image_id != record.image_id:
        drift.append(f"image {record.image_id[:19]} -> {image_id[:19]}")
    for key, label in (("sdk", "claude-agent-sdk"), ("cli", "CLI")):
        before, now = record.versions.get(key), versions.get(key)
        if before != now:
            drift.append(f"{label} {before or '(not recorded)'} -> {now}")
    if spec.workspace is not None and spec.workspace_hash and spec.workspace.is_dir():
        # The rules the original was hashed by; a home inside it carries its mark.
        if tree_hash(spec.workspace, rules_for(spec.workspace, spec.exclude)) != spec.workspace_hash:
            drift.append(f"workspace source {spec.workspace} changed since the original ran")
    return drift


# long: one check after another, each a one-line ReproError, in the order a person fixes them
def plan_repro(
    home: Home,
    original: JobDir,
    record: JobRecord,
    *,
    image: PinnedImage,
    live: bool = False,
    allow_drift: bool = False,
    workflow: str | None = None,
    name: str | None = None,
) -> ReproPlan:
    """Everything the reproduction needs, checked. Raises ReproError (one line each)."""
    if not record.finished:
        raise ReproError(
            f"job {original.batch}/{original.job} is still {record.status}: reproduce it when it ended"
        )
    spec = record.spec
    if spec.workspace is not None and not spec.workspace.is_dir():
        raise ReproError(f"the original workspace source {spec.workspace} is gone: restore it to reproduce")
    drift = drift_between(record, image, spec)
    if drift and not allow_drift:
        raise ReproError(
            f"refusing to reproduce {original.batch}/{original.job}: {'; '.join(drift)} "
            "(pass --allow-drift to run anyway)"
        )
    if live:
        gateway = spec.gateway
        if gateway.mode.rules.gateways_file:  # the job's copy of its scenario (running/jobs.py)
            copy = sorted(original.root.glob("scenario.*"))
            if not copy:
                raise ReproError(
                    f"job {original.job}: its scenario copy is missing, so --live cannot replay the model"
                )
            gateway = replace(gateway, scenario=copy[0])
        mode = gateway.mode
    else:
        try:
            recording_source(original.root)
        except FileNotFoundError:
            raise ReproError(
                f"job {original.batch}/{original.job} has no recording of its model exchanges "
                "(logs/recording.jsonl): reproduce it with --live"
            ) from None
        gateway = GatewaySpec(mode=GatewayMode.REPLAY, recording=original.root)
        mode = gateway.mode
    job_id = check_name("job", name) if name else new_job_id(home, record)
    if home.job(REPRO_BATCH, job_id).record_path.exists():
        raise ReproError(f"job {REPRO_BATCH}/{job_id} already exists: pick another --name")
    flows_from = None if workflow else (original.flows if original.flows.is_dir() else None)
    new_spec = replace(spec, id=job_id, gateway=gateway, workflow=workflow or spec.workflow)
    return ReproPlan(
        original=original,
        record=record,
        spec=new_spec,
        image=image,
        mode=mode,
        flows_from=flows_from,
        drift=drift,
    )


# -- comparing two runs --------------------------------------------------------------------------


def verdict_of(text: str) -> str | None:
    """A judge's conclusion (achieved / not_yet / unreachable) when the text is a verdict."""
    if not re.search(VERDICT_HINT, text or "", re.IGNORECASE):
        return None
    from flower.starter.goal import parse_verdict  # lazy: importing flower costs about a second

    verdict = parse_verdict(text)
    return None if verdict.note == VERDICT_NO_CONCLUSION else verdict.state  # that note: "this is no verdict"


def step_view(row: dict[str, Any]) -> dict[str, Any]:
    calls = row.get("tool_calls") or []
    return {
        "step": str(row.get("step") or "?"),
        "ok": bool(row.get("ok")),
        "verdict": verdict_of(str(row.get("text") or "")),
        "tool_calls": [
            {"name": c.get("name"), "input": c.get("input")} for c in calls if isinstance(c, dict)
        ],
        "error": row.get("error") or None,
    }


DIGEST_BYTES = 256 * 1024 * 1024  # a bigger file is named by its size, not hashed whole


def _file_digest(root: Path, rel: str) -> str:
    h = hashlib.sha256()
    seen = 0
    with open_file(root, rel) as f:
        while seen < DIGEST_BYTES and (chunk := f.read(min(1 << 20, DIGEST_BYTES - seen))):
            h.update(chunk)
            seen += len(chunk)
        size = os.fstat(f.fileno()).st_size
    return h.hexdigest()[:16] if seen >= size else f"{h.hexdigest()[:16]}+{size}"


def workspace_files(root: Path) -> dict[str, str]:
    """shown path -> content digest of every file under `root` (untrusted_files.walk: symlinks by target,
    never followed; a FIFO, socket or device by its kind, never opened; bounded)."""
    out: dict[str, str] = {}
    if not root.is_dir() or root.is_symlink():
        return out
    tree = walk(root)
    for rel, entry in sorted(tree.entries.items()):
        if entry.kind == "symlink":
            out[shown(rel)] = f"link:{shown(entry.target or '?')}"
        elif entry.kind != "file":
            out[shown(rel)] = entry.kind
        else:
            try:
                out[shown(rel)] = _file_digest(root, rel)
            except OSError as exc:
                out[shown(rel)] = f"unreadable: {exc.strerror or exc}"
    out.update({shown(rel): f"not listed: {why}" for rel, why in tree.skipped})
    if tree.truncated:
        out["…"] = f"more than {MAX_ENTRIES} entries: the rest not listed"
    return out


def copy_flows(original: Path, dest: Path) -> list[tuple[str, str]]:
    """The original job's copy of its workflow code into the reproduction's flows/: no symlink
    followed out of it, FIFOs, sockets and devices skipped, bounded. Returns what was skipped
    (shown path, why). runner.stage_job should call this for `flows_from`."""
    return copy_tree(original, dest)


def changes(source: dict[str, str], final: dict[str, str]) -> dict[str, str]:
    """What a run did to its workspace: path -> added / modified / deleted."""
    out = {p: "added" if p not in source else "modified" for p, d in final.items() if source.get(p) != d}
    out.update({p: "deleted" for p in source if p not in final})
    return dict(sorted(out.items()))


@dataclass
class ReproDiff:
    original: list[dict[str, Any]]
    repro: list[dict[str, Any]]
    files_original: dict[str, str]
    files_repro: dict[str, str]
    files_differing: list[str]

    @property
    def steps_identical(self) -> bool:
        keys = ("step", "ok", "verdict", "tool_calls")
        return [{k: s[k] for k in keys} for s in self.original] == [
            {k: s[k] for k in keys} for s in self.repro
        ]

    @property
    def identical(self) -> bool:
        return self.steps_identical and self.files_original == self.files_repro and not self.files_differing

    def first_difference(self) -> str | None:
        for i in range(max(len(self.original), len(self.repro))):
            a = self.original[i] if i < len(self.original) else None
            b = self.repro[i] if i < len(self.repro) else None
            if a is None or b is None:
                which = "the original" if b is None else "the reproduction"
                extra = (a or b or {}).get("step")
                return f"step attempt {i + 1} ({extra}) exists only in {which}"
            for key in ("step", "ok", "verdict", "tool_calls"):
                if a[key] != b[key]:
                    return f"step attempt {i + 1} ({a['step']}): {key} differs"
        if self.files_original != self.files_repro:
            return "the runs changed different files in their workspaces"
        if self.files_differing:
            return f"files end up different: {', '.join(self.files_differing[:5])}"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "identical": self.identical,
            "first_difference": self.first_difference(),
            "steps": {"original": self.original, "repro": self.repro},
            "files": {
                "original": self.files_original,
                "repro": self.files_repro,
                "differing": self.files_differing,
            },
        }


def compare_jobs(original: JobDir, repro: JobDir, source: Path | None) -> ReproDiff:
    """Side by side: manifest rows (step, ok, verdict, tool calls) and workspace changes."""
    before = workspace_files(source) if source is not None else {}
    final_a, final_b = workspace_files(original.workspace), workspace_files(repro.workspace)
    differing = sorted(p for p in set(final_a) | set(final_b) if final_a.get(p) != final_b.get(p))
    return ReproDiff(
        original=[step_view(r) for r in original.manifest()],
        repro=[step_view(r) for r in repro.manifest()],
        files_original=changes(before, final_a),
        files_repro=changes(before, final_b),
        files_differing=differing,
    )


def write_report(plan: ReproPlan, repro: JobDir, record: JobRecord, diff: ReproDiff) -> Path:
    data = {
        "format": "flower-batch/repro@1",
        "original": f"{plan.original.batch}/{plan.original.job}",
        "repro": f"{repro.batch}/{repro.job}",
        "mode": plan.mode,
        "image_id": plan.image.id,
        "drift": plan.drift,
        "status": {"original": plan.record.status, "repro": record.status},
        "reason": {"original": plan.record.reason, "repro": record.reason},
        "replay": read_state(repro.logs) if plan.mode.rules.replays else None,
        **diff.to_dict(),
    }
    path = repro.root / REPORT
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def pinned_image(ref: str) -> PinnedImage:
    """A runtime image, pinned; ReproError when it is not in the engine."""
    from flower_batch.running.image import pinned_image as read_pinned

    try:
        return read_pinned(ref)
    except ImageMissing:
        raise ReproError(
            f"image {ref[:19]} is not in the Docker engine: rebuild it, or pass --image TAG --allow-drift"
        ) from None
