"""A job as one ATIF trajectory (Harbor's Agent Trajectory Interchange Format, RFC 0001).

How a flower job maps onto it (docs/export.md says the same for readers):

- the root trajectory is the job: its steps in manifest order. Each flower step attempt (a
  manifest row: a step, a `#round2`, a `·判定#1` judge round, a `#retry1`) opens with a `system`
  step naming it; `extra.flower` on every step says which row and which session it belongs to.
  A row that resumes an earlier row's session continues that conversation; a new session
  starts a fresh one;
- a handoff (the context nearly full): the retired session's steps, then a `system` step whose
  observation is the handoff document, then the successor session's steps;
- user messages are `user` steps; each model call is one `agent` step with its text, thinking,
  tool calls, the tools' results as its observation, and its tokens and cost as metrics;
- a subagent (the Agent tool) is an embedded ATIF trajectory in `subagent_trajectories`,
  referenced by `trajectory_id` from the observation of the call that launched it;
- `final_metrics`: the job's tokens (subagents included) and cost (the gateway's meter, as in
  record.json), with the verdict (status, failure class, reason, and a graded job's reward) in
  its `extra`;
- a job its verifier graded (a Harbor task): the reward where Harbor keeps it, in a trial's
  `verifier_result.rewards` (`{"reward": 0.75, ...reward.json's other keys}`), here under the
  trajectory's `extra` (ATIF itself has no reward field); the task's folder, digest, metadata
  and network in `extra.flower_batch.harbor`.

Everything here is plain JSON data: the writer needs no ATIF library, and the tests check the
result with harbor's own validator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flower.catalogue.context import HANDOFF_TITLE
from flower_batch import __version__
from flower_batch.harbor.shown import harbor_facts
from flower_batch.jobmodel.record import JobRecord
from flower_batch.jobmodel.status import Status
from flower_batch.layout import JobDir
from flower_batch.transcripts.steps import JobTranscripts, RowSession, handoff_doc, load_job, step_kind

from .atif_session import SessionSteps, clip, session_steps, timestamp
from .classes import failure_class
from .costs import Pricer

SCHEMA_VERSION = "ATIF-v1.8"
AGENT_NAME = "flower"
NOTES = (
    "Exported by flower-batch from the job's sessions.db and manifest.json. Each flower step attempt "
    "(a manifest row: step, round, judge round, retry) opens with a system step; extra.flower on "
    "every step names the row and the session. A new session starts a fresh conversation. Totals "
    "in final_metrics include the subagents; total_cost_usd is the gateway's metered cost."
)


def job_atif(jd: JobDir, record: JobRecord | None = None) -> dict[str, Any]:
    """The ATIF trajectory of the job in `jd` (its record read when not given)."""
    if record is None:
        try:
            record = jd.record()
        except (OSError, ValueError):
            record = None
    return _Builder(jd, record, load_job(jd.runs), Pricer.of_job(jd)).build()


def _opening(name: str, kind: Mapping[str, Any], resumes: str | None) -> str:
    base, number = kind["base"], kind["number"]
    said = {
        "judge": f"judge round {number} of step {base}",
        "round": f"step {base}, work round {number}",
        "retry": f"step {base}, retry {number}",
    }.get(kind["kind"], f"step {name}")
    return f"flower: {said}" + (f" (continues the session of {resumes})" if resumes else "")


class _Builder:
    def __init__(self, jd: JobDir, record: JobRecord | None, job: JobTranscripts, pricer: Pricer) -> None:
        self.jd, self.record, self.job, self.pricer = jd, record, job, pricer
        self.run_id = f"{jd.batch}/{jd.job}"
        self.steps: list[dict[str, Any]] = []
        self.parts: list[SessionSteps] = []  # every converted transcript, subagents included
        self.subagents: dict[str, dict[str, Any]] = {}  # trajectory_id -> embedded trajectory
        self.versions = dict(record.versions) if record else {}

    # -- the root -------------------------------------------------------------------------
    def build(self) -> dict[str, Any]:
        seen: list[tuple[str, str | None]] = []
        for index, row in enumerate(self.job.rows):
            self.row(index, row, seen)
        for found in self.job.unlisted():
            flower = {"step": None, "kind": "unlisted", "session_id": found.session_id}
            self.system("flower: a step with no manifest row (it was running when the job ended)", flower)
            self.session(found, flower)
        self.leftover_subagents()
        if not self.steps:
            reason = (self.record.reason if self.record else None) or "nothing was recorded"
            self.system(f"flower: the job has no recorded conversation ({reason})", {"step": None})
        for i, step in enumerate(self.steps, start=1):
            step["step_id"] = i
        out: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "session_id": self.run_id,
            "trajectory_id": self.run_id,
            "agent": self.agent(AGENT_NAME),
            "steps": [_ordered(s) for s in self.steps],
            "notes": NOTES,
            "final_metrics": self.final_metrics(),
            "extra": {"flower_batch": self.job_facts(), **self.verifier_result()},
        }
        if self.subagents:
            out["subagent_trajectories"] = list(self.subagents.values())
        return out

    def row(self, index: int, row: Mapping[str, Any], seen: list[tuple[str, str | None]]) -> None:
        name = str(row.get("step") or "?")
        kind = step_kind(name)
        sid = row.get("session_id") if isinstance(row.get("session_id"), str) else None
        resumes = next((r for r, s in reversed(seen) if sid and s == sid), None)
        seen.append((name, sid))
        flower = {"step": name, **kind, "row": index}
        facts = {
            key: row.get(key)
            for key in ("run", "ok", "error", "cost_usd", "num_turns", "duration_s", "attempts", "model")
        }
        opening = self.system(_opening(name, kind, resumes), {**flower, **facts, "session_id": sid})
        if timestamp(row.get("started_at")):
            opening["timestamp"] = row["started_at"]
        sessions = self.job.sessions(index)
        previous: SessionSteps | None = None
        for position, found in enumerate(sessions):
            if found.role == "current" and previous is not None and sessions[position - 1].role == "retired":
                self.handoff(name, sessions[position - 1].session_id, found.session_id, previous, flower)
            previous = self.session(
                found, {**flower, "session_id": found.session_id, "session_role": found.role}
            )
        if row.get("error"):
            self.system(clip(f"flower: {name} ended with an error: {row['error']}"), {**flower, "ok": False})

    def handoff(
        self, step: str, old: str, new: str, retired: SessionSteps, flower: Mapping[str, Any]
    ) -> None:
        """The handoff between two sessions of `step`; its observation is the document handed over.
        The notes file holds the latest handoff of the step's base name (a later judge round's
        overwrites an earlier one's), so it is used when its title names this step; otherwise the
        document is the retired session's last answer (the one the runtime saved)."""
        doc = handoff_doc(self.jd.workspace, step)
        extra: dict[str, Any] = {"document": doc["doc"]}
        text = doc["text"] or ""
        if not text.startswith(HANDOFF_TITLE.format(step=step)):
            said = [s["message"] for s in retired.steps if s["source"] == "agent" and s["message"]]
            text = said[-1] if said else text
            extra["from"] = "the retired session's last answer (the file now holds a later handoff)"
        if doc["problem"]:
            extra["problem"] = doc["problem"]
        message = f"flower: handoff — session {old} wrote the handoff document, session {new} takes over"
        step_ = self.system(message, {**flower, "handoff": {"from": old, "to": new}})
        step_["observation"] = {"results": [{"content": text, "extra": extra}]}

    def session(self, found: RowSession, flower: Mapping[str, Any]) -> SessionSteps:
        links = _subagents_by_call(found)

        def ref(call_id: str) -> dict[str, Any] | None:
            key = links.get(call_id)
            return self.embed(found, key) if key is not None else None

        part = session_steps(found.entries, self.pricer, ref, flower)
        self.parts.append(part)
        self.steps += part.steps
        return part

    def system(self, message: str, flower: Mapping[str, Any]) -> dict[str, Any]:
        step = {"source": "system", "message": message, "extra": {"flower": dict(flower)}}
        self.steps.append(step)
        return step

    # -- subagents ------------------------------------------------------------------------
    def embed(self, found: RowSession, key: str) -> dict[str, Any]:
        """The ref to `key`'s subagent trajectory of session `found`, embedded on first use."""
        tid = f"{found.session_id}/{key}"
        meta = _metadata(found.subs.get(key, []))
        if tid not in self.subagents:
            flower = {"session_id": found.session_id, "transcript": key, "agent_type": meta.get("agentType")}
            part = session_steps(found.subs.get(key, []), self.pricer, lambda _: None, flower)
            self.parts.append(part)
            steps = part.steps or [
                {"source": "system", "message": "the subagent left no messages", "extra": {"flower": flower}}
            ]
            for i, step in enumerate(steps, start=1):
                step["step_id"] = i
            self.subagents[tid] = {
                "schema_version": SCHEMA_VERSION,
                "session_id": self.run_id,
                "trajectory_id": tid,
                "agent": self.agent(str(meta.get("agentType") or "subagent"), part),
                "steps": [_ordered(s) for s in steps],
                "final_metrics": _totals([part], len(steps), part.cost_usd if not part.unpriced else None),
                "extra": {
                    "flower": {
                        **flower,
                        "description": meta.get("description"),
                        "finished": meta.get("finished"),
                    }
                },
            }
        extra = {k: meta.get(k) for k in ("agentType", "description") if meta.get(k) is not None}
        return {"trajectory_id": tid, "session_id": self.run_id, **({"extra": extra} if extra else {})}

    def leftover_subagents(self) -> None:
        """Subagents no call of the exported rows launched (their call's row was cut, or the
        metadata is missing): embedded all the same, listed by one system step."""
        refs = []
        sessions = [
            *[s for i in range(len(self.job.rows)) for s in self.job.sessions(i)],
            *self.job.unlisted(),
        ]
        for found in sessions:
            for key in found.subs:
                if key and f"{found.session_id}/{key}" not in self.subagents:
                    refs.append({"subagent_trajectory_ref": [self.embed(found, key)]})
        if refs:
            step = self.system("flower: subagents whose launching call is not in the steps", {"step": None})
            step["observation"] = {"results": refs}

    # -- facts ----------------------------------------------------------------------------
    def agent(self, name: str, part: SessionSteps | None = None) -> dict[str, Any]:
        models = (part.models if part else None) or list(
            dict.fromkeys(m for p in self.parts for m in p.models)
        )
        out: dict[str, Any] = {"name": name, "version": self.versions.get("flower_batch") or __version__}
        if models:
            out["model_name"] = models[0]
        if part is None:
            extra = {
                "workflow": self.record.spec.workflow if self.record else None,
                "sdk": self.versions.get("sdk"),
                "cli": self.versions.get("cli"),
                "image_id": self.record.image_id if self.record else None,
                "task_image": task_image.to_dict()
                if self.record and (task_image := self.record.spec.task_image)
                else None,
                "models": models,
            }
            out["extra"] = {k: v for k, v in extra.items() if v is not None}
        return out

    def final_metrics(self) -> dict[str, Any]:
        calls = sum(p.cost_usd for p in self.parts)
        metered = self.record.cost_usd if self.record else None
        unpriced = sum(p.unpriced for p in self.parts)
        total = metered if metered is not None else (round(calls, 8) if not unpriced else None)
        out = _totals(self.parts, len(self.steps), total)
        out["extra"] = {
            **self.verdict(),
            "cost_source": "gateway meter (record.json)" if metered is not None else "sum of the calls",
            "calls_cost_usd": round(calls, 8),
            "unpriced_calls": unpriced,
            "subagents": len(self.subagents),
        }
        return out

    def verdict(self) -> dict[str, Any]:
        r = self.record
        if r is None:
            return {"status": None}
        return {
            "status": r.status.value,
            "passed": r.status is Status.PASSED,
            "class": failure_class(r),
            "reason": r.reason,
            "check_exit": r.check_exit,
            "num_turns": r.num_turns,
            "duration_s": r.duration_s,
            **({"reward": r.reward.value} if r.reward else {}),
        }

    def verifier_result(self) -> dict[str, Any]:
        """Harbor's `verifier_result` of a graded job: its rewards by name, `reward` first."""
        r = self.record
        if r is None or r.reward is None:
            return {}
        return {"verifier_result": {"rewards": {"reward": r.reward.value, **r.reward.detail}}}

    def job_facts(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"batch": self.jd.batch, "job": self.jd.job}
        spec = self.record.spec.to_dict() if self.record else {}
        facts.update({k: spec.get(k) for k in ("task", "variant", "repeat", "matrix", "workflow")})
        if self.record and self.record.spec.harbor:
            facts["harbor"] = harbor_facts(self.record.spec)
        if self.job.problems:
            facts["not_exported"] = list(self.job.problems)
        return facts


def _subagents_by_call(found: RowSession) -> dict[str, str]:
    """tool_use id of the launching call -> the subagent's transcript key."""
    links: dict[str, str] = {}
    for key, entries in found.subs.items():
        tool_use = _metadata(entries).get("toolUseId") if key else None
        if key and isinstance(tool_use, str):
            links[tool_use] = key
    return links


def _metadata(entries: list[dict[str, Any]]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for entry in entries:
        if entry.get("type") == "agent_metadata":
            meta.update(entry)
    return meta


def _totals(parts: list[SessionSteps], steps: int, cost: float | None) -> dict[str, Any]:
    return {
        "total_prompt_tokens": sum(p.prompt_tokens for p in parts),
        "total_completion_tokens": sum(p.completion_tokens for p in parts),
        "total_cached_tokens": sum(p.cached_tokens for p in parts),
        "total_cost_usd": cost,
        "total_steps": steps,
    }


_ORDER = ("step_id", "timestamp", "source", "model_name", "message", "reasoning_content", "tool_calls")


def _ordered(step: Mapping[str, Any]) -> dict[str, Any]:
    """A step with its fields in the RFC's order (step_id first), for people reading the file."""
    head = {k: step[k] for k in _ORDER if k in step}
    return {**head, **{k: v for k, v in step.items() if k not in head}}
