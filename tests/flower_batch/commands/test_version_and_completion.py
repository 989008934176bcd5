"""`--version` on both commands and shell completion through typer's own mechanism (issue 21
item 3): completion is driven as the shell drives it, by click's env-var protocol
(_FLOWER_BATCH_COMPLETE=complete_bash, COMP_WORDS, COMP_CWORD), in a subprocess."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flower.versions import cli_version, image_build_key, version_lines
from flower_batch.layout import Home
from tests.view_fixtures import write_job

REPO = Path(__file__).resolve().parents[3]
FLOWER_BATCH = "from flower_batch.cli import main; main()"
FLOWER = "from flower.cli import main; main()"
NO_ENGINE = "unix:///nonexistent/flower-batch-test/docker.sock"


def _run(code: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", **env}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=full, timeout=120
    )


def test_the_versions_are_the_installed_ones() -> None:
    sdk = importlib.metadata.version("claude-agent-sdk")
    import claude_agent_sdk._cli_version as bundled

    assert cli_version() == bundled.__cli_version__
    assert version_lines("flower")[:3] == [
        f"flower {importlib.metadata.version('flower-batch')}",
        f"claude-agent-sdk {sdk}",
        f"Claude Code CLI {bundled.__cli_version__} (bundled with the SDK)",
    ]


def test_the_build_key_is_read_inside_a_runtime_image_only(tmp_path: Path) -> None:
    assert image_build_key(tmp_path / "absent") is None
    (tmp_path / "key").write_text("ab" * 40 + "\n")
    assert image_build_key(tmp_path / "key") == "ab" * 32


def test_flower_batch_version_without_an_engine_still_answers() -> None:
    proc = _run(FLOWER_BATCH, "--version", DOCKER_HOST=NO_ENGINE)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:3] == version_lines("flower-batch")[:3]
    assert lines[3].startswith(
        "runtime image flower-batch-runtime:latest: unknown (Docker daemon is not reachable"
    )
    from flower_batch.running.image import PROJECT_ROOT

    assert (
        lines[4] == f"flower-batch runs from: checkout {PROJECT_ROOT}"
    )  # an installed one: tests/test_installed_tool.py


@pytest.mark.docker
def test_flower_batch_version_names_the_built_image() -> None:
    from tests.batch_fixtures.rig import docker_client

    proc = _run(FLOWER_BATCH, "--version")
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.splitlines()[3]
    client = docker_client()
    try:
        image = client.images.get("flower-batch-runtime:latest")
    except Exception:  # not built on this machine: the line says so
        assert line == "runtime image flower-batch-runtime:latest: not built (flower-batch image build)"
        return
    finally:
        client.close()
    assert line.startswith(f"runtime image flower-batch-runtime:latest: {image.id} (built with flower-batch ")


def test_flower_version() -> None:
    proc = _run(FLOWER, "--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == version_lines("flower")


def test_completion_is_offered_by_typer() -> None:
    for code in (FLOWER_BATCH, FLOWER):
        shown = _run(code, "--help").stdout
        assert "--install-completion" in shown and "--show-completion" in shown and "--version" in shown


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    write_job(home, "nightly-1", "fizzbuzz.c.r1")
    write_job(home, "nightly-1", "fizzbuzz.py.r1")
    write_job(home, "nightly-2", "fizzbuzz.c.r1")
    write_job(home, "nightly-2", "hello.r1")
    (home / "nightly-2" / "fizzbuzz.not-a-job").mkdir()  # no record: not offered
    (home / ".sessions").mkdir()
    return home


def complete(words: str, home: Path | None = None, prog: str = "flower-batch") -> list[str]:
    var = "_" + prog.upper().replace("-", "_") + "_COMPLETE"
    env = {var: "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1)}
    if home is not None:
        env["FLOWER_BATCH_HOME"] = str(home)
    proc = _run(FLOWER_BATCH if prog == "flower-batch" else FLOWER, **env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_job_ids_complete_for_the_commands_that_take_one(home: Path) -> None:
    for command in ("show", "wake", "logs", "stop", "repro"):
        assert complete(f"flower-batch {command} fizz", home) == ["fizzbuzz.c.r1", "fizzbuzz.py.r1"], command
    assert complete("flower-batch show nightly-2/", home) == ["nightly-2/fizzbuzz.c.r1", "nightly-2/hello.r1"]
    assert complete("flower-batch show nightly-2/h", home) == ["nightly-2/hello.r1"]


def test_batch_names_complete_and_the_home_on_the_command_line_counts(home: Path) -> None:
    assert complete("flower-batch report nig", home) == ["nightly-1", "nightly-2"]
    assert complete("flower-batch compare nightly-1 nightly-", home) == ["nightly-1", "nightly-2"]
    assert complete("flower-batch ls --batch nightly-", home) == ["nightly-1", "nightly-2"]
    assert complete(f"flower-batch report --home {home} nightly-1") == ["nightly-1"]
    assert complete("flower-batch ru") == ["run"]
    assert complete("flower ru", prog="flower") == ["run"]


def test_completion_reads_the_home_boundedly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import flower_batch.layout as layout

    home = tmp_path / "home"
    for n in range(30):
        write_job(home, "big", f"job-{n:03d}")
    monkeypatch.setattr(layout, "SCAN_LIMIT", 10)
    assert len(Home(home).job_refs("big/")) == 10  # no more entries read than the limit
    assert len(Home(home).job_refs("big/", limit=5)) == 5
    assert Home(home).job_refs("../") == [] and Home(tmp_path / "none").batch_names() == []
