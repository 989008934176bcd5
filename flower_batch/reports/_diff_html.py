"""A job's workspace diff summary in the HTML report: files +added ~changed -removed, lines +/-.

The counts come from `flower_batch.workspace_diff.summarize`, computed at report time from the
job's workspace and the task's source (`BatchResults.diffs`). A source that no longer exists is
said so; a job without a workspace folder (never started) shows nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

DIFF_CSS = """
.diffsum { font-family: ui-monospace, monospace; font-size: 12px; color: #57606a; }
.diffsum .a { color: #1a7f37; } .diffsum .r { color: #cf222e; } .diffsum .c { color: #9a6700; }
"""


def diff_summary_span(summary: Mapping[str, Any] | None) -> str:
    if not summary or summary.get("workspace_missing"):
        return ""
    if summary.get("source_missing"):
        return (
            f'<span class="diffsum" data-diff="unavailable" title="{escape(str(summary.get("source")))}">'
            "diff: source gone</span>"
        )
    files = (
        f'<span class="a">+{summary["added"]}</span> <span class="c">~{summary["changed"]}</span> '
        f'<span class="r">-{summary["removed"]}</span> files'
    )
    lines = f'<span class="a">+{summary["lines_added"]}</span> <span class="r">-{summary["lines_removed"]}</span> lines'
    capped = " (capped)" if summary.get("truncated") else ""
    attrs = " ".join(
        f'data-{k.replace("_", "-")}="{int(summary[k])}"'
        for k in ("added", "changed", "removed", "lines_added", "lines_removed")
    )
    return f'<span class="diffsum" data-diff="ok" {attrs}>{files} · {lines}{capped}</span>'
