"""`flower-batch view` and report.html in real headless Chromium, driven over DevTools (tests/cdp.py):
the page loads, batches and jobs list, a trajectory expands to its tool calls and results, the
filter hides jobs, a record changing on disk shows without a reload, model markup stays text,
the diff view, and the report's SVG plots rendered."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower.context.store import SQLiteSessionStore
from flower_batch.layout import Home
from flower_batch.reports import html_report
from flower_batch.view.server import ViewServer
from tests.cdp import Browser
from tests.flower_batch.reports.test_results import results  # noqa: F401 — the shared results fixture
from tests.view_fixtures import real_home, write_job, write_source

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
FLOWER_BATCH = REPO / ".venv" / "bin" / "flower-batch"
BIG = "".join(f"line {i} of a long file\n" for i in range(8000))


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = real_home(tmp_path_factory.mktemp("view-browser"))
    # A second batch: one job whose diff is far over the per-file cap.
    src = tmp_path_factory.mktemp("big-src")
    (src / "big.txt").write_text(BIG)
    root = write_job(home, "diffs", "big-1", "passed", source=src)
    (root / "workspace").mkdir()
    (root / "workspace" / "big.txt").write_text(BIG.upper())
    return home


@pytest.fixture(scope="module")
def url(home) -> Iterator[str]:
    """The real command, as a user starts it."""
    proc = subprocess.Popen(
        [str(FLOWER_BATCH), "view", "--home", str(home), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        yield line.split("flower-batch view: ", 1)[1].split()[0]
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


def rows(b: Browser) -> list[str]:
    return b.evaluate("Array.from(document.querySelectorAll('tr.job')).map(r => r.dataset.job)")


def open_job(b: Browser, url: str, job: str, batch: str = "nightly") -> None:
    """A fresh page load (not a same-document hash change), then a click on the job's row."""
    b.goto("about:blank")
    b.goto(f"{url}#batch={batch}")
    b.wait_for(f"document.querySelector('tr.job[data-job=\"{job}\"]')")
    b.evaluate(f"document.querySelector('tr.job[data-job=\"{job}\"]').click()")
    b.wait_for(f"document.querySelector('tr.detail[data-detail-for=\"{job}\"] .detail')")


def test_page_lists_batches_and_jobs(browser, url):
    browser.goto(url)
    names = browser.wait_for(
        "Array.from(document.querySelectorAll('#batches li[data-batch]')).map(li => li.dataset.batch)"
    )
    assert names == ["diffs", "nightly"]
    assert "4 jobs" in browser.evaluate(
        "document.querySelector('#batches li[data-batch=\"nightly\"]').textContent"
    )
    browser.evaluate("document.querySelector('#batches li[data-batch=\"nightly\"]').click()")
    browser.wait_for("document.querySelectorAll('tr.job').length === 4")
    assert sorted(rows(browser)) == ["build-handoff-1", "hello-base-1", "hello-fast-1", "hello-fast-2"]
    statuses = browser.evaluate("Array.from(document.querySelectorAll('tr.job')).map(r => r.dataset.status)")
    assert sorted(statuses) == ["failed", "passed", "passed", "queued"]
    assert browser.evaluate("location.hash") == "#batch=nightly"


def test_trajectory_expands_to_tool_calls_results_and_subagents(browser, url):
    open_job(browser, url, "hello-base-1")
    steps = browser.evaluate("Array.from(document.querySelectorAll('details.step')).map(d => d.dataset.step)")
    assert steps == ["确认需求", "设定目标", "干活", "干活·判定#1", "干活#round2", "干活·判定#2"]
    # Closed at first; opening the judge round shows its Read call, input and result.
    judge = "document.querySelector('details.step[data-step=\"干活·判定#1\"]')"
    assert browser.evaluate(f"{judge}.open") is False
    browser.evaluate(f"{judge}.open = true; {judge}.querySelector('details.tool').open = true")
    tool = browser.evaluate(f"{judge}.querySelector('details.tool[data-tool=\"Read\"]').innerText")
    assert (
        "tool call Read" in tool
        and "hello.txt" in tool
        and "result" in tool
        and "hello" in tool.split("result", 1)[1]
    )
    assert "judge round 1" in browser.evaluate(f"{judge}.querySelector('summary').innerText")
    # The work step: the Agent call with its subagent's own Write.
    work = "document.querySelector('details.step[data-step=\"干活\"]')"
    browser.evaluate(f"{work}.open = true; {work}.querySelectorAll('details').forEach(d => d.open = true)")
    sub = browser.evaluate(f"{work}.querySelector('details.subagent').innerText")
    assert "subagent coder" in sub and "tool call Write" in sub and "File created successfully" in sub
    assert "tokens" in browser.evaluate(f"{work}.querySelector('summary').innerText")


def test_handoff_is_shown_between_the_sessions(browser, url):
    open_job(browser, url, "build-handoff-1")
    step = "document.querySelector('details.step[data-step=\"干活\"]')"
    browser.evaluate(f"{step}.open = true")
    text = browser.evaluate(f"{step}.innerText")
    assert "(handed over)" in text and "handoff → successor session" in text and "交接-干活.md" in text
    assert text.index("(handed over)") < text.index("handoff → successor") < text.index("你在接手")


def test_an_open_job_has_a_link_that_opens_it(browser, url):
    open_job(browser, url, "hello-base-1")
    assert browser.evaluate("location.hash") == "#batch=nightly&job=hello-base-1"
    link = browser.evaluate("location.href")
    browser.goto("about:blank")
    browser.goto(link)
    browser.wait_for("document.querySelector('tr.detail[data-detail-for=\"hello-base-1\"] details.step')")


def test_model_markup_is_shown_as_text_never_run(browser, url):
    open_job(browser, url, "build-handoff-1")
    browser.evaluate(
        "document.querySelectorAll('details').forEach(d => { if (d.dataset.key !== 'diff') d.open = true; })"
    )
    text = browser.evaluate("document.querySelector('td.trajectory').innerText")
    assert text.count("<script>window.__pwned = 1</script>") >= 3  # two replies and the tool result
    browser.goto(f"{url}#batch=nightly")
    browser.wait_for("document.querySelectorAll('tr.job').length === 4")
    reason = browser.evaluate("document.querySelector('tr.job[data-job=\"hello-fast-1\"]').innerText")
    assert "<script>window.__pwned = 1</script>" in reason
    open_job(browser, url, "build-handoff-1")
    browser.evaluate(
        "document.querySelectorAll('details').forEach(d => { if (d.dataset.key !== 'diff') d.open = true; })"
    )
    time.sleep(0.5)
    assert browser.evaluate("window.__pwned === undefined")
    assert browser.evaluate("document.querySelectorAll('script').length") == 1  # only /app.js
    assert browser.evaluate("document.querySelectorAll('main img').length") == 0


def test_filter_hides_jobs_that_do_not_match(browser, url):
    browser.goto(f"{url}#batch=nightly")
    browser.wait_for("document.querySelectorAll('tr.job').length === 4")
    browser.evaluate(
        "var f = document.getElementById('filter'); f.value = 'fast'; f.dispatchEvent(new Event('input'))"
    )
    browser.wait_for("document.querySelectorAll('tr.job').length === 2")
    assert sorted(rows(browser)) == ["hello-fast-1", "hello-fast-2"]
    assert "2 of 2 matching (4 jobs)" in browser.evaluate("document.getElementById('count').textContent")
    browser.evaluate("document.querySelector('#status-buttons button[data-status=\"failed\"]').click()")
    browser.wait_for("document.querySelectorAll('tr.job').length === 1")
    assert rows(browser) == ["hello-fast-1"]
    browser.evaluate(
        "var f = document.getElementById('filter'); f.value = ''; f.dispatchEvent(new Event('input'));"
        "document.querySelector('#status-buttons button[data-status=\"\"]').click()"
    )
    browser.wait_for("document.querySelectorAll('tr.job').length === 4")


def test_diff_view_lists_added_changed_removed_and_caps(browser, url):
    open_job(browser, url, "hello-base-1")
    browser.evaluate("document.querySelector('details.diff').open = true")
    browser.wait_for("document.querySelector('details.diff .diff-summary')")
    files = browser.evaluate(
        "Object.fromEntries(Array.from(document.querySelectorAll('details.file')).map(f => [f.dataset.path, f.dataset.kind]))"
    )
    assert files["hello.txt"] == "added" and files["notes.md"] == "changed" and files["old.txt"] == "removed"
    assert files["blob.bin"] == "changed" and "keep.txt" not in files
    blob = browser.evaluate("document.querySelector('details.file[data-path=\"blob.bin\"]').innerText")
    assert "(binary)" in blob
    notes = "document.querySelector('details.file[data-path=\"notes.md\"]')"
    browser.evaluate(f"{notes}.open = true")
    diff = browser.evaluate(f"{notes}.querySelector('pre.diff').innerText")
    assert "-line two" in diff and "+line 2" in diff and "+line four" in diff
    assert browser.evaluate(f"{notes}.querySelector('pre.diff span.add').textContent").startswith("+")
    # One file whose diff is far over the cap: capped, and said so.
    open_job(browser, url, "big-1", batch="diffs")
    browser.evaluate("document.querySelector('details.diff').open = true")
    browser.wait_for("document.querySelector('details.file[data-path=\"big.txt\"]')")
    browser.evaluate("document.querySelector('details.file[data-path=\"big.txt\"]').open = true")
    big = browser.evaluate("document.querySelector('details.file[data-path=\"big.txt\"]').innerText")
    assert "+8000 -8000" in big and "diff capped here" in big
    shown = browser.evaluate(
        "document.querySelector('details.file[data-path=\"big.txt\"] pre.diff').textContent.length"
    )
    assert 60_000 < shown <= 64 * 1024 + 8000  # the per-file cap (+ one newline per line split back)


def test_live_update_without_reload(browser, tmp_path):
    """A running job: its record and its sessions.db change on disk; the open page follows."""
    home = tmp_path / "home"
    root = write_job(home, "live", "job-1", "running", source=write_source(tmp_path / "src"))
    server = ViewServer(Home(home), 0)
    server.start_in_thread()
    try:
        browser.goto(f"{server.url}#batch=live")
        browser.wait_for("document.querySelector('tr.job[data-job=\"job-1\"]')")
        browser.evaluate("window.__sameDocument = 'yes'")
        assert browser.evaluate("document.querySelector('tr.job').dataset.status") == "running"
        browser.evaluate("document.querySelector('tr.job').click()")
        browser.wait_for("document.querySelector('td.trajectory .detail')")
        assert "no steps recorded yet" in browser.evaluate(
            "document.querySelector('td.trajectory').innerText"
        )
        # The runtime writes a transcript line (through the real store, which stays open as a job's would).
        store = SQLiteSessionStore(root / "runs" / "sessions.db")
        key = {"project_key": "-workspace", "session_id": "sess-live"}
        store._append_sync(
            key,
            [  # noqa: SLF001 — the store's own synchronous append
                {
                    "type": "user",
                    "uuid": "u1",
                    "timestamp": "2026-01-01T00:00:00Z",
                    "message": {"role": "user", "content": "LIVE-PROMPT"},
                },
                {
                    "type": "assistant",
                    "uuid": "a1",
                    "timestamp": "2026-01-01T00:00:01Z",
                    "message": {
                        "id": "m1",
                        "role": "assistant",
                        "model": "scripted-model",
                        "content": [{"type": "text", "text": "LIVE-REPLY"}],
                        "usage": {"input_tokens": 7},
                    },
                },
            ],
        )
        browser.wait_for(
            "document.querySelector('td.trajectory').innerText.indexOf('in progress') >= 0", timeout=30
        )
        browser.evaluate("document.querySelector('details.step.running').open = true")
        assert "LIVE-REPLY" in browser.evaluate("document.querySelector('details.step.running').innerText")
        store.close()
        # The job ends: its record is rewritten.
        write_job(home, "live", "job-1", "passed", source=tmp_path / "src", cost_usd=0.5)
        browser.wait_for("document.querySelector('tr.job').dataset.status === 'passed'", timeout=30)
        assert "$0.5000" in browser.evaluate("document.querySelector('tr.job').innerText")
        browser.wait_for(
            "document.querySelector('td.trajectory').innerText.indexOf('passed') >= 0", timeout=30
        )
        # Still open and still the same document: updated in place, not reloaded.
        assert browser.evaluate("window.__sameDocument") == "yes"
        assert browser.evaluate("document.querySelector('details.step.running').open") is True
        # A new job appears in the list too.
        write_job(home, "live", "job-2", "queued")
        browser.wait_for("document.querySelectorAll('tr.job').length === 2", timeout=30)
    finally:
        server.shutdown()
        server.server_close()


def test_report_plots_render_in_chromium(browser, results, tmp_path):  # noqa: F811
    page = tmp_path / "report.html"
    page.write_text(html_report(results), encoding="utf-8")
    browser.goto(page.as_uri())
    info = browser.evaluate("""JSON.stringify(Array.from(document.querySelectorAll('svg.plot')).map(s => ({
        id: s.id, w: s.getBoundingClientRect().width, h: s.getBoundingClientRect().height,
        variants: Array.from(s.querySelectorAll('g.variant')).map(g => g.dataset.variant),
        bars: Array.from(s.querySelectorAll('rect.bar')).map(r => r.getBBox().height),
        errs: s.querySelectorAll('g.ci').length})))""")
    plots = {p["id"]: p for p in json.loads(info)}
    assert set(plots) == {"plot-pass-rate", "plot-cost-pass"}
    assert all(p["w"] > 200 and p["h"] > 200 for p in plots.values())
    variants = [v for v, c in results.comparison.variant_totals.items() if c.n]
    assert plots["plot-pass-rate"]["variants"] == variants and plots["plot-pass-rate"]["errs"] == len(
        variants
    )
    rates = [results.comparison.variant_totals[v].pass_rate for v in variants]
    for height, rate in zip(plots["plot-pass-rate"]["bars"], rates, strict=True):
        assert abs(height - 220 * rate) < 0.5  # the bar is the pass rate on the 220-px axis
    assert plots["plot-cost-pass"]["variants"] == variants


def test_report_job_body_is_built_on_open_and_stays_text(browser, results, tmp_path):  # noqa: F811
    page = tmp_path / "report.html"
    page.write_text(html_report(results), encoding="utf-8")
    browser.goto(page.as_uri())
    job = "document.getElementById('job-hello.careful.r1')"
    assert (
        browser.evaluate(f"{job}.querySelector('.job-body').childNodes.length") == 0
    )  # not built until opened
    browser.evaluate(f"{job}.open = true")
    browser.wait_for(f"{job}.querySelector('.job-body table.kv')")
    text = browser.evaluate(f"{job}.querySelector('.job-body').innerText")
    assert "say hi </script><script>alert(1)</script>" in text  # the prompt, as text
    assert "$ grep -q hi hello.txt\nhello.txt: hi" in text and "last line of the log" in text
    assert "work" in browser.evaluate(f"{job}.querySelector('table.steps').innerText")
    failed = "document.getElementById('job-hello.careful.r3')"
    browser.evaluate(f"{failed}.open = true")
    failed_text = browser.wait_for(f"{failed}.querySelector('.job-body').innerText")
    assert "\x1b" not in failed_text and "check exit 1" in failed_text
    assert browser.evaluate("document.querySelectorAll('script').length") == 2
    # The text filter searches what the bodies hold (the prompt), not only the summary line.
    browser.evaluate(
        "var s = document.getElementById('search'); s.value = 'fizzbuzz'; s.dispatchEvent(new Event('input'))"
    )
    shown = browser.evaluate(
        "Array.from(document.querySelectorAll('details.job:not(.hidden)')).map(d => d.id)"
    )
    assert shown and all(s.startswith("job-fizz.") for s in shown)
