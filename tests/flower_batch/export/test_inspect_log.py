"""Inspect eval logs of a batch, read back with inspect-ai's own reader (tests/view_fixtures.py's
real runs: the starter flow, a handoff, a failed job and a queued one)."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from flower_batch.export.batch import export_batch
from flower_batch.layout import Home
from tests.cdp import Browser
from tests.view_fixtures import real_home

pytestmark = pytest.mark.slow
INSPECT = Path(__file__).resolve().parents[3] / ".venv" / "bin" / "inspect"


def read_eval_log(path: str):  # type: ignore[no-untyped-def]
    from inspect_ai.log import read_eval_log as read  # here: importing it costs every worker ~4 s of CPU

    return read(path)


def list_eval_logs(folder: str):  # type: ignore[no-untyped-def]
    from inspect_ai.log import list_eval_logs as listed

    return listed(folder)


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> dict[str, object]:
    home = real_home(tmp_path_factory.mktemp("inspect"))
    done = export_batch(Home(home), "nightly", "inspect", tmp_path_factory.mktemp("logs"))
    assert done.problems == [] and done.jobs == 3 and done.skipped == 1  # the queued job
    return {
        f"{log.eval.task}/{log.eval.task_args['variant']}": log
        for log in map(read_eval_log, map(str, done.files))
    }


def test_one_log_per_task_and_variant_with_its_jobs_as_epochs(logs):
    assert sorted(logs) == ["build/handoff", "hello/base", "hello/fast"]
    for log in logs.values():
        assert log.eval.eval_set_id == "nightly" and log.eval.dataset.sample_ids == [log.eval.task]
        assert [s.id for s in log.samples] == [log.eval.task] * len(log.samples)
    fast = logs["hello/fast"]
    assert fast.status == "started"  # one of its jobs is still queued
    assert fast.results.total_samples == 2 and fast.results.completed_samples == 1
    assert logs["hello/base"].status == "success"


def test_scores_carry_pass_fail_class_and_reason(logs):
    (passed,) = logs["hello/base"].samples
    (failed,) = logs["hello/fast"].samples
    assert (
        passed.scores["flower_batch"].value == "C"
        and passed.scores["flower_batch"].metadata["status"] == "passed"
    )
    score = failed.scores["flower_batch"]
    assert score.value == "I" and score.metadata["class"] == "agent"  # failed, no check exit recorded
    assert "check exited 1" in score.explanation and score.metadata["reason"] == score.explanation
    assert logs["hello/base"].results.scores[0].metrics["accuracy"].value == 1.0
    assert logs["hello/fast"].results.scores[0].metrics["accuracy"].value == 0.0


def test_the_transcript_is_messages_with_usage_and_cost(logs):
    (sample,) = logs["hello/base"].samples
    roles = [m.role for m in sample.messages]
    assert set(roles) == {"system", "user", "assistant", "tool"}
    ask = next(m for m in sample.messages if m.role == "assistant" and m.tool_calls)
    assert ask.tool_calls[0].function == "mcp__human__ask" and ask.model == "scripted-model"
    answer = sample.messages[sample.messages.index(ask) + 1]
    assert answer.role == "tool" and answer.tool_call_id == ask.tool_calls[0].id
    judged = [m.text for m in sample.messages if m.role == "system" and "judge round" in m.text]
    assert len(judged) == 2
    agent = next(m for m in sample.messages if m.role == "tool" and m.function == "Agent")
    assert "subagent trajectory" in agent.text
    (usage,) = sample.model_usage.values()
    assert usage.input_tokens > 0 and usage.output_tokens > 0 and usage.input_tokens_cache_read > 0
    assert usage.total_cost == 0.2178  # the record's metered cost
    assert sample.metadata["job"] == "hello-base-1" and sample.total_time == 4.5


def test_inspect_lists_the_files(logs, tmp_path):
    folder = Path(next(iter(logs.values())).location).parent
    assert len(list_eval_logs(str(folder))) == 3
    assert all(json.loads(Path(log.location).read_text())["version"] == 2 for log in logs.values())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_inspect_view_opens_a_log_and_its_transcript(logs, tmp_path):
    """Inspect's own viewer (`inspect view`) in headless Chromium: the cell's log, its sample with
    the score, and the transcript's tool call; a screenshot is kept in the test's folder."""
    log = logs["hello/base"]
    folder, name = Path(log.location).parent, Path(log.location).name
    port = _free_port()
    proc = subprocess.Popen(
        [str(INSPECT), "view", "--log-dir", str(folder), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    browser = None
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "inspect view did not start"
                time.sleep(0.5)
        browser = Browser()
        browser.goto(f"http://127.0.0.1:{port}/#/tasks/{name}/samples/sample/hello/1/")
        browser.wait_for("document.body && document.body.innerText.includes('mcp__human__ask')", timeout=90)
        text = browser.evaluate("document.body.innerText")
        assert (
            "judge round 1 of step 干活" in text
            and "ASSISTANT" in text
            and "TOOL" not in text.split("SCORE")[0]
        )
        shot = browser.call("Page.captureScreenshot", format="png")
        png = tmp_path / "inspect-view.png"
        png.write_bytes(base64.b64decode(shot["data"]))
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    finally:
        if browser is not None:
            browser.close()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
