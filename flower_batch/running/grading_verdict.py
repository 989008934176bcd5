"""A job's verdict from its hidden tests (verifier.py): once the workflow and any check passed,
`error` when they gave no reward it can take, else passed at or above the job's threshold
(`pass_reward`, default 1.0) and failed below it. After the agent ran out of time or failed
(graded all the same, as Harbor grades a trial), a reward at the threshold passes the job and
says what the agent did; below it, or none, the agent's own verdict stands with the reward in
its reason. Pure."""

from __future__ import annotations

from dataclasses import replace

from flower_batch.jobmodel.classes import FailureClass
from flower_batch.jobmodel.grading import DEFAULT_PASS_REWARD
from flower_batch.jobmodel.status import Status
from flower_batch.running.causes import Verdict
from flower_batch.running.verifier import Graded


def graded_verdict(graded: Graded, threshold: float | None) -> Verdict:
    if graded.reward is None:
        return Verdict(Status.ERROR, graded.error or "the hidden tests gave no reward", FailureClass.VERIFIER)
    need = DEFAULT_PASS_REWARD if threshold is None else threshold
    value = graded.reward.value
    if value >= need:
        return Verdict(Status.PASSED, f"reward {value:g} (a pass needs {need:g})", FailureClass.PASSED)
    return Verdict(Status.FAILED, f"reward {value:g}, below the {need:g} a pass needs", FailureClass.VERIFIER)


def graded_after_agent_failure(agent: Verdict, graded: Graded, threshold: float | None) -> Verdict:
    """`agent`: the job's verdict from its workflow alone (timeout, or failed by its steps)."""
    if graded.reward is None:
        why = graded.error or "the hidden tests gave no reward"
        return replace(agent, reason=f"{agent.reason}; graded all the same: {why}")
    tests = graded_verdict(graded, threshold)
    if tests.status is Status.PASSED:
        return replace(tests, reason=f"{tests.reason}, though the agent did not finish: {agent.reason}")
    return replace(agent, reason=f"{agent.reason}; graded all the same: {tests.reason}")
