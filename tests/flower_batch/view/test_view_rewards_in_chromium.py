"""Rewards and Harbor tasks as a person sees them, in real headless Chromium (tests/cdp.py): the
viewer shows a graded job's reward beside its status and, opened, its reward and Harbor task;
report.html's job body shows the same (both built by the pages' own scripts)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower_batch.reports import html_report, results_from_records
from tests.batch_fixtures.harbor_records import BATCH, harbor_home
from tests.cdp import Browser

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
FLOWER_BATCH = REPO / ".venv" / "bin" / "flower-batch"


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[Path, dict]:  # type: ignore[type-arg]
    home, records = harbor_home(tmp_path_factory.mktemp("harbor-view"))
    return home.root, records


@pytest.fixture(scope="module")
def url(graded) -> Iterator[str]:  # type: ignore[no-untyped-def]
    proc = subprocess.Popen(
        [str(FLOWER_BATCH), "view", "--home", str(graded[0]), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().split("flower-batch view: ", 1)[1].split()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    b = Browser()
    try:
        yield b
    finally:
        b.close()


def test_the_viewer_shows_the_reward_and_the_harbor_task(browser, url) -> None:  # type: ignore[no-untyped-def]
    browser.goto(f"{url}#batch={BATCH}")
    browser.wait_for("document.querySelectorAll('tr.job').length === 2")
    row = "document.querySelector('tr.job[data-job=\"regex-log.a.r1\"]')"
    assert "reward 0.75" in browser.evaluate(f"{row}.innerText")
    browser.evaluate(f"{row}.click()")
    detail = "document.querySelector('tr.detail[data-detail-for=\"regex-log.a.r1\"]')"
    browser.wait_for(f"{detail} && {detail}.querySelector('.kv')")
    text = browser.evaluate(f"{detail}.innerText")
    assert "0.75 (passes at 1) · checks_passed 3" in text
    assert "difficulty medium · category data-processing · tags regex, logs" in text
    assert "asks no-network, ran gateway" in text and "sha256:" in text


def test_the_report_s_job_body_shows_the_reward_and_the_task(browser, graded, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    home, records = graded
    page = tmp_path / "report.html"
    page.write_text(html_report(results_from_records(records, batch=BATCH)))
    browser.goto(page.as_uri())
    job = "document.getElementById('job-regex-log.a.r1')"
    browser.wait_for(job)
    browser.evaluate(f"{job}.open = true")
    browser.wait_for(f"{job}.querySelector('.job-body table')")
    body = browser.evaluate(f"{job}.querySelector('.job-body').innerText")
    assert "0.75 (passes at 1); checks_passed 3" in body
    assert "task.toml asks no-network; ran with gateway" in body
    assert "difficulty medium · category data-processing · tags regex, logs" in body
