"""What `--version` says, for `flower` and `flower-batch`: the project's version, the
claude-agent-sdk's and the Claude Code CLI's it bundles, and inside a runtime image the build
key baked into it. Read from the installed metadata and one small file of the SDK, without
importing the SDK (a `--version` answers in the time Python starts).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from pathlib import Path

PROJECT = "flower-batch"  # the distribution both commands come from (pyproject.toml)
SDK = "claude-agent-sdk"
BUILD_KEY_FILE = Path("/opt/flower/build-key")  # written by `flower-batch image build`
_CLI_VERSION = re.compile(r"__cli_version__\s*=\s*['\"]([^'\"]+)['\"]")


def project_version() -> str:
    try:
        return importlib.metadata.version(PROJECT)
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown (not installed)"


def sdk_version() -> str:
    try:
        return importlib.metadata.version(SDK)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def cli_version() -> str:
    """The bundled CLI's version, from claude_agent_sdk/_cli_version.py, read as text."""
    spec = importlib.util.find_spec("claude_agent_sdk")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        try:
            found = _CLI_VERSION.search((Path(folder) / "_cli_version.py").read_text(encoding="utf-8"))
        except OSError:
            continue
        if found:
            return found.group(1)
    return "unknown"


def image_build_key(path: Path = BUILD_KEY_FILE) -> str | None:
    """The runtime image's build key when this process runs in one, else None."""
    try:
        return path.read_text(encoding="utf-8").strip()[:64] or None
    except OSError:
        return None


def version_lines(program: str) -> list[str]:
    lines = [
        f"{program} {project_version()}",
        f"claude-agent-sdk {sdk_version()}",
        f"Claude Code CLI {cli_version()} (bundled with the SDK)",
    ]
    key = image_build_key()
    if key:
        lines.append(f"runtime image build {key} (this container's)")
    return lines
