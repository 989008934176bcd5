"""The comparison section of report.html: one self-contained <section> (its own style, no
script needed, no network), plus the comparison document embedded as JSON."""

from __future__ import annotations

import json
from html import escape

from .diff import IMPROVEMENT, REGRESSION, BatchDiff
from .render import columns, one_sided_lines, row_cells

_CSS = """
#baseline table { border-collapse: collapse; }
#baseline th, #baseline td { border: 1px solid #d0d7de; padding: 6px 10px; text-align: left; vertical-align: top; }
#baseline thead th { background: #f6f8fa; }
#baseline tr.pooled td, #baseline tr.pooled th { background: #f6f8fa; font-style: italic; }
#baseline .v-regression { color: #cf222e; font-weight: 700; }
#baseline .v-improvement { color: #1a7f37; font-weight: 700; }
#baseline .v-no-data { color: #6e7781; }
#baseline .verdict-line { font-size: 15px; margin: 8px 0; }
"""


def comparison_section(diff: BatchDiff) -> str:
    """The section report.html opens with when it has a baseline: the verdict line, then the
    rows, regressions first."""
    rows = []
    for row in diff.verdict_first:
        cells = row_cells(row, diff.has_rewards)
        kind = row.verdict.replace(" ", "-")
        head, *rest = cells
        tds = "".join(
            f'<td class="v-{kind}">{escape(c)}</td>' if i == 4 else f"<td>{escape(c)}</td>"
            for i, c in enumerate(rest)
        )
        attrs = (
            f'class="{"pooled" if row.task is None else "cell-diff"}" data-verdict="{escape(row.verdict)}" '
            f'data-task="{escape(row.task or "")}" data-variant="{escape(row.variant or "")}"'
        )
        rows.append(f"<tr {attrs}><th>{escape(head)}</th>{tds}</tr>")
    verdict = (
        f'<span class="v-{REGRESSION}">Regression</span>'
        if diff.regressions
        else f'<span class="v-{IMPROVEMENT}">No regression</span>'
    )
    one_sided = "".join(f"<li>{escape(line)}</li>" for line in one_sided_lines(diff))
    data = json.dumps(diff.to_document(), ensure_ascii=False)
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    head = "".join(f"<th>{escape(c)}</th>" for c in columns(diff))
    return (
        f'<section id="baseline"><style>{_CSS}</style>'
        f"<h2>Against the baseline {escape(diff.base.label)}</h2>"
        f'<div class="verdict-line" id="baseline-verdict">{verdict} · {escape(diff.headline())}</div>'
        f'<p class="detail">Baseline: {escape(diff.base.source)} ({escape(diff.base.gateway_label)}'
        f"{', ' + escape(diff.base.generated_at) if diff.base.generated_at else ''}). {escape(diff.rule)}.</p>"
        f'<table id="baseline-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        f"{f'<ul id=baseline-one-sided>{one_sided}</ul>' if one_sided else ''}"
        f'<script type="application/json" id="comparison-data">{data}</script></section>'
    )
