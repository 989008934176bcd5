"""The JUnit file validates against the JUnit XML schema; the HTML report, opened in headless
Chromium with no network, renders the comparison (DOM after scripts ran) and a non-blank page."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from lxml import etree

from flower_batch.reports import junit_xml, write_html
from tests.flower_batch.reports.test_results import results  # noqa: F401 — the shared results fixture

SCHEMA = Path(__file__).resolve().parents[3] / "tests" / "schemas" / "junit.xsd"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_junit_validates_against_the_schema(results) -> None:  # noqa: F811
    schema = etree.XMLSchema(etree.parse(str(SCHEMA)))
    doc = etree.fromstring(junit_xml(results).encode("utf-8"))
    assert schema.validate(doc), schema.error_log.last_error
    cases = doc.findall(".//testcase")
    assert len(cases) == len(results.jobs)
    # A broken file is refused: the schema is not a rubber stamp.
    broken = etree.fromstring(
        b'<testsuites><testsuite name="x" tests="one" failures="0" errors="0"/></testsuites>'
    )
    assert not schema.validate(broken)


def headless_chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM, "headless Chromium is needed (make prereqs installs it)"
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--proxy-server=127.0.0.1:9",
            "--window-size=1300,1600",
            *args,
        ],  # any network use would fail
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


@pytest.mark.slow
def test_html_report_renders_in_headless_chromium(results, tmp_path: Path) -> None:  # noqa: F811
    page = write_html(results, tmp_path / "report.html")
    dom = headless_chromium("--virtual-time-budget=2000", "--dump-dom", page.as_uri(), cwd=tmp_path).stdout
    assert "Comparison" in dom and "scripted" in dom.lower()
    comp = results.comparison
    for task in comp.tasks:
        assert re.search(rf">\s*{re.escape(task)}\s*<", dom), task
    for variant in comp.variants:
        assert re.search(rf">\s*{re.escape(variant)}\s*<", dom), variant
    for job in results.jobs:
        assert job.id in dom
    shot = tmp_path / "report.png"
    headless_chromium(f"--screenshot={shot}", page.as_uri(), cwd=tmp_path)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    # A blank 1300x1600 page compresses to a few KB; a rendered table with text does not.
    assert len(png) > 30_000, len(png)
