"""examples/ci/nightly.yml: valid YAML with the steps a nightly needs, and its two shell steps
(finding the baseline run, running the matrix with or without a baseline) executed for real
with stand-ins for `gh` and `flower-batch`.

PyYAML is not a project dependency; the YAML is parsed with Debian's python3-yaml (the way the
report test uses Debian's chromium) and the test is skipped where it is missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from flower_batch.jobsfile import load_jobs_file

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "examples" / "ci" / "nightly.yml"
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin")


def _load() -> dict[str, Any]:
    if SYSTEM_PYTHON is None:
        pytest.skip("no /usr/bin/python3")
    proc = subprocess.run(
        [
            SYSTEM_PYTHON,
            "-c",
            "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout, default=str)",
            str(WORKFLOW),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode != 0 and "No module named 'yaml'" in proc.stderr:
        pytest.skip("python3-yaml is not installed")
    assert proc.returncode == 0, proc.stderr  # a YAML syntax error fails here
    doc = json.loads(proc.stdout)
    doc["on"] = doc.pop("on", None) or doc.pop("True", None) or doc.pop("true", None)  # YAML 1.1: on = true
    return doc


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    return _load()


def _steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return workflow["jobs"]["matrix"]["steps"]


def _step(workflow: dict[str, Any], name_part: str) -> dict[str, Any]:
    return next(s for s in _steps(workflow) if name_part in s.get("name", ""))


def test_it_is_a_scheduled_workflow_with_the_permissions_it_uses(workflow) -> None:
    assert workflow["on"]["schedule"][0]["cron"].count(" ") == 4
    assert "baseline_run_id" in workflow["on"]["workflow_dispatch"]["inputs"]
    assert workflow["permissions"] == {"contents": "read", "actions": "read", "checks": "write"}
    for step in _steps(workflow):
        assert ("uses" in step) != ("run" in step), step  # each step does exactly one thing
        if "uses" in step:
            assert "@v" in step["uses"], step["uses"]  # pinned to a major version


def test_the_baseline_is_the_artifact_the_last_successful_run_uploaded(workflow) -> None:
    find = _step(workflow, "Find the baseline")
    assert "--status success" in find["run"] and find["id"] == "baseline"
    download = _step(workflow, "Download the baseline")
    upload = _step(workflow, "Upload results")
    assert download["uses"].startswith("actions/download-artifact@") and upload["uses"].startswith(
        "actions/upload-artifact@"
    )
    assert download["with"]["name"] == upload["with"]["name"]
    assert download["with"]["run-id"] == "${{ steps.baseline.outputs.run_id }}"
    assert download["with"]["github-token"] == "${{ github.token }}"
    assert download["continue-on-error"] is True and download["if"] == "steps.baseline.outputs.run_id != ''"
    assert "volumes/*/report/results.json" in upload["with"]["path"] and upload["if"] == "always()"
    names = [s.get("name", s.get("uses")) for s in _steps(workflow)]
    assert (
        names.index(find["name"])
        < names.index(download["name"])
        < names.index(_step(workflow, "Run the matrix")["name"])
    )


def test_the_matrix_step_uses_the_api_secret_and_a_real_jobs_file(workflow) -> None:
    run = _step(workflow, "Run the matrix")
    assert run["env"] == {"ANTHROPIC_API_KEY": "${{ secrets.ANTHROPIC_API_KEY }}"}
    assert "--fail-on-regression" in run["run"] and "--baseline" in run["run"]
    jobs = load_jobs_file(REPO / "examples" / "ci" / "nightly-jobs.toml")
    assert "examples/ci/nightly-jobs.toml" in run["run"]
    assert jobs.gateway_modes == ("anthropic",) and jobs.budget_usd is not None
    junit = _step(workflow, "JUnit")
    assert junit["with"]["report_paths"] == "volumes/*/report/junit.xml" and junit["if"] == "always()"


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _stub(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def test_the_find_step_picks_the_last_success_an_input_or_none(workflow, tmp_path: Path) -> None:
    script = _step(workflow, "Find the baseline")["run"]
    _stub(tmp_path / "bin" / "gh", 'echo "$@" > "$GH_ARGS"; echo 4242\n')
    env = {
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "GH_ARGS": str(tmp_path / "gh-args"),
        "GITHUB_REPOSITORY": "me/repo",
        "GITHUB_WORKFLOW": "nightly-eval",
        "GITHUB_REF_NAME": "main",
    }

    def output(picked: str) -> str:
        out = tmp_path / f"output-{picked or 'empty'}"
        proc = _bash(script, tmp_path, {**env, "PICKED": picked, "GITHUB_OUTPUT": str(out)})
        assert proc.returncode == 0, proc.stderr
        return out.read_text()

    assert output("") == "run_id=4242\n"
    assert (
        "run list --repo me/repo --workflow nightly-eval --branch main --status success"
        in (tmp_path / "gh-args").read_text()
    )
    (tmp_path / "gh-args").unlink()
    assert output("777") == "run_id=777\n" and not (tmp_path / "gh-args").exists()  # gh not asked
    assert output("none") == "run_id=\n"


def test_the_matrix_step_adds_the_baseline_only_when_one_was_downloaded(workflow, tmp_path: Path) -> None:
    script = _step(workflow, "Run the matrix")["run"]
    _stub(tmp_path / ".venv" / "bin" / "flower-batch", 'echo "$@" > args\n')
    summary = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    assert _bash(script, tmp_path, env).returncode == 0
    assert (tmp_path / "args").read_text().split() == [
        "matrix",
        "examples/ci/nightly-jobs.toml",
        "-j",
        "4",
        "--fail-under",
        "0.8",
    ]
    assert "No baseline yet" in summary.read_text()
    (tmp_path / "baseline" / "nightly" / "report").mkdir(parents=True)
    (tmp_path / "baseline" / "nightly" / "report" / "results.json").write_text("{}")
    summary.unlink()
    assert _bash(script, tmp_path, env).returncode == 0
    assert (tmp_path / "args").read_text().split()[-3:] == [
        "--baseline",
        "baseline/nightly/report/results.json",
        "--fail-on-regression",
    ]
    assert not summary.exists()  # the summary is then the comparison, written by flower-batch itself
