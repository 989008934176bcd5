"""A self-contained HTML report: inline CSS and JS, nothing fetched, opens from disk.

Top: which model produced the results (a scripted model is impossible to miss), the
summary, the comparison table (colour-coded pass rates) and two SVG plots. Below: one
collapsible entry per job: its summary line (status, cost, turns, duration, workspace diff
summary, reason) is HTML; its inputs, steps, verdicts, check output and log tail are built by
the script from the embedded document when opened, so a 5,000-job report carries them once.
The results.json document is embedded as <script type="application/json" id="results-data">.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from flower_batch.harbor.shown import fmt_reward, harbor_lines
from flower_batch.jobmodel.outcome import JobOutcome
from flower_batch.jobmodel.spec import JobSpec
from flower_batch.jobmodel.units import format_duration

from ._diff_html import DIFF_CSS, diff_summary_span
from ._job_body_js import JOB_BODY_JS, JOB_LIST_CSS
from ._plots import PLOTS_CSS, plots_section
from ._results import (
    BatchResults,
    fmt_cell_detail,
    fmt_ci,
    fmt_cost,
    fmt_passed,
    fmt_rate,
    rate_class,
)
from ._stats import Cell
from ._table import summary_line

_CSS = """
:root { --good:#1a7f37; --mid:#9a6700; --bad:#cf222e; --none:#6e7781; --line:#d0d7de; --bg:#f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1f2328; }
header, main { max-width: 1200px; margin: 0 auto; padding: 16px 24px; }
h1 { font-size: 22px; margin: 8px 0; } h2 { font-size: 17px; margin: 24px 0 8px; }
.mode { display: inline-block; padding: 6px 12px; border-radius: 6px; font-weight: 600; font-size: 15px; }
.mode-scripted { background: #fff8c5; border: 2px solid #d4a72c; }
.mode-replay { background: #ddf4ff; border: 2px solid #54aeff; }
.mode-anthropic { background: #dafbe1; border: 2px solid #4ac26b; }
.meta { color: var(--none); font-size: 12px; margin-top: 6px; word-break: break-all; }
.summary { font-size: 15px; margin: 10px 0; }
table { border-collapse: collapse; }
.compare th, .compare td { border: 1px solid var(--line); padding: 8px 12px; vertical-align: top; text-align: left; }
.compare thead th { background: var(--bg); }
.compare td.cell { cursor: pointer; min-width: 150px; }
.compare tr.totals td, .compare tr.totals th { background: var(--bg); font-style: italic; }
.rate { font-size: 16px; font-weight: 700; }
.good .rate { color: var(--good); } .mid .rate { color: var(--mid); } .bad .rate { color: var(--bad); } .none .rate { color: var(--none); }
td.good { background: #dafbe1; } td.mid { background: #fff8c5; } td.bad { background: #ffebe9; }
.ci, .detail { color: #57606a; font-size: 12px; }
.controls { margin: 8px 0; display: flex; gap: 8px; flex-wrap: wrap; align-items: center; }
.controls button { border: 1px solid var(--line); background: white; border-radius: 6px; padding: 3px 10px; cursor: pointer; }
.controls button.on { background: #0969da; color: white; border-color: #0969da; }
.controls input { padding: 4px 8px; border: 1px solid var(--line); border-radius: 6px; min-width: 220px; }
details.job { border: 1px solid var(--line); border-radius: 6px; margin: 6px 0; }
details.job > summary { padding: 6px 10px; cursor: pointer; display: flex; gap: 14px; align-items: baseline; flex-wrap: wrap; }
details.job[open] > summary { border-bottom: 1px solid var(--line); background: var(--bg); }
.job-body { padding: 8px 14px; }
.id { font-family: ui-monospace, monospace; font-weight: 600; }
.badge { border-radius: 10px; padding: 1px 8px; font-size: 12px; font-weight: 600; color: white; }
.s-passed { background: var(--good); } .s-failed, .s-timeout, .s-budget { background: var(--bad); }
.s-error { background: #8250df; } .s-skipped, .s-pending, .s-running, .s-queued { background: var(--none); }
.s-orphaned, .s-never-started, .s-paused { background: #9a6700; }
.badge.image { background: #0969da; } .task-image { font-size: 12px; font-weight: normal; color: #57606a; }
.badge.reward { background: #8250df; }
.kv td { padding: 2px 10px 2px 0; vertical-align: top; } .kv td:first-child { color: #57606a; white-space: nowrap; }
.steps th, .steps td { border-bottom: 1px solid var(--line); padding: 3px 10px 3px 0; text-align: left; }
pre { background: #0d1117; color: #e6edf3; padding: 10px; border-radius: 6px; overflow: auto; max-height: 360px; white-space: pre-wrap; }
.reason { color: var(--bad); }
.hidden { display: none; }
"""

_JS = """
(function () {
  var active = {status: null, task: null, variant: null, text: ''};
  var jobs = Array.prototype.slice.call(document.querySelectorAll('details.job'));
  var info = document.getElementById('filter-info');
  function apply() {
    var shown = 0;
    jobs.forEach(function (el) {
      var ok = (!active.status || el.dataset.status === active.status) &&
               (!active.task || el.dataset.task === active.task) &&
               (!active.variant || el.dataset.variant === active.variant) &&
               (!active.text || window.jobSearchText(el).indexOf(active.text) >= 0);
      el.classList.toggle('hidden', !ok);
      if (ok) { shown += 1; }
    });
    var parts = [];
    if (active.task) { parts.push(active.task + ' x ' + active.variant); }
    if (active.status) { parts.push(active.status); }
    info.textContent = shown + ' of ' + jobs.length + ' jobs' + (parts.length ? ' (' + parts.join(', ') + ')' : '');
  }
  document.querySelectorAll('.controls button[data-status]').forEach(function (b) {
    b.addEventListener('click', function () {
      var s = b.dataset.status || null;
      active.status = active.status === s ? null : s;
      document.querySelectorAll('.controls button[data-status]').forEach(function (o) {
        o.classList.toggle('on', (o.dataset.status || null) === active.status && active.status !== null);
      });
      apply();
    });
  });
  document.getElementById('search').addEventListener('input', function (e) {
    active.text = e.target.value.trim().toLowerCase(); apply();
  });
  document.querySelectorAll('td.cell').forEach(function (td) {
    td.addEventListener('click', function () {
      var same = active.task === td.dataset.task && active.variant === td.dataset.variant;
      active.task = same ? null : td.dataset.task;
      active.variant = same ? null : td.dataset.variant;
      apply();
      document.getElementById('jobs').scrollIntoView();
    });
  });
  document.getElementById('expand').addEventListener('click', function () {
    var open = !jobs.some(function (j) { return j.open; });
    jobs.forEach(function (j) { if (!j.classList.contains('hidden')) { j.open = open; } });
  });
  apply();
})();
"""


def html_report(results: BatchResults, sections: Sequence[str] = ()) -> str:
    """The whole report as one HTML string. `sections` (the comparison against a baseline: the
    verdict a nightly's reader opens the page for) come first, before the table and the plots."""
    # <, > and & as \u escapes: the embedded JSON can never close or open a tag.
    data = json.dumps(results.to_document(), ensure_ascii=False, separators=(",", ":"))
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(results.batch)} · flower-batch report</title>",
            f"<style>{_CSS}{PLOTS_CSS}{DIFF_CSS}{JOB_LIST_CSS}</style></head><body>",
            _header(results),
            "<main>",
            *sections,
            _comparison(results),
            plots_section(results.comparison),
            _jobs(results),
            "</main>",
            f'<script type="application/json" id="results-data">{data}</script>',
            f"<script>{JOB_BODY_JS}{_JS}</script>",
            "</body></html>",
        ]
    )


def write_html(results: BatchResults, path: Path, sections: Sequence[str] = ()) -> Path:
    path.write_text(html_report(results, sections), encoding="utf-8")
    return path


def _header(results: BatchResults) -> str:
    modes = results.gateway_modes
    mode_class = f"mode-{modes[0]}" if len(modes) == 1 else "mode-scripted"
    meta = [f"image {results.image_id or 'unknown'}"]
    if results.generated_at:
        meta.append(f"generated {results.generated_at}")
    return (
        f"<header><h1>{escape(results.batch)}</h1>"
        f'<div class="mode {mode_class}" id="gateway-mode" data-modes="{escape(",".join(modes))}">'
        f"Model: {escape(results.gateway_label)}</div>"
        f'<div class="summary" id="summary">{escape(summary_line(results))}</div>'
        f'<div class="meta">{escape(" · ".join(meta))}</div></header>'
    )


def _task_images(results: BatchResults, task: str) -> str:
    """Under a task's name: the images its jobs ran in, when not the runtime image; a Harbor
    task's metadata, digest and network (as its task.toml asks, as its jobs ran)."""
    shown = dict.fromkeys(j.task_image.describe() for j in results.jobs if j.task == task and j.task_image)
    harbor = next((j for j in results.jobs if j.task == task and j.harbor), None)
    lines = [f"in {s}" for s in shown] + (harbor_lines(harbor) if harbor else [])
    return "".join(f'<div class="task-image">{escape(line)}</div>' for line in lines)


def _comparison(results: BatchResults) -> str:
    c = results.comparison
    head = "".join(f"<th>{escape(v)}</th>" for v in c.variants)
    rows = []
    for task in c.tasks:
        title = escape(results.descriptions.get(task, ""), quote=True)
        cells = "".join(_cell(c.cell(task, v), task, v) for v in c.variants)
        rows.append(f'<tr><th title="{title}">{escape(task)}{_task_images(results, task)}</th>{cells}</tr>')
    if len(c.tasks) > 1:
        cells = "".join(_cell(c.variant_totals[v], "", v, clickable=False) for v in c.variants)
        rows.append(f'<tr class="totals"><th>all tasks</th>{cells}</tr>')
    return (
        "<h2>Comparison</h2>"
        '<p class="detail">Pass rate over repeats with its 95% Wilson interval; then '
        + ("the mean reward its verifier gave, " if c.has_rewards else "")
        + "mean cost (metered by the gateway, outside the container), turns and duration. Click a cell "
        "to list its jobs.</p>"
        f'<table class="compare" id="comparison"><thead><tr><th>task</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _cell(cell: Cell | None, task: str, variant: str, clickable: bool = True) -> str:
    if cell is None:
        return '<td class="none">—</td>'
    kind = "cell " if clickable else ""
    attrs = (
        f'class="{kind}{rate_class(cell)}" data-task="{escape(task)}" data-variant="{escape(variant)}" '
        f'data-passed="{cell.passed}" data-n="{cell.n}" data-pending="{cell.pending}"'
    )
    return (
        f'<td {attrs}><div class="rate">{fmt_passed(cell)} · {fmt_rate(cell)}</div>'
        f'<div class="ci">{escape(fmt_ci(cell) and "95% CI " + fmt_ci(cell))}</div>'
        f'<div class="detail">{escape(fmt_cell_detail(cell))}</div></td>'
    )


def _jobs(results: BatchResults) -> str:
    statuses = [
        "passed",
        "failed",
        "error",
        "timeout",
        "budget",
        "disk",
        "paused",
        "skipped",
        "orphaned",
        "never-started",
        "running",
        "queued",
        "pending",
    ]
    present = [s for s in statuses if any(results.status_of(j.id) == s for j in results.jobs)]
    buttons = "".join(f'<button data-status="{s}">{s}</button>' for s in present)
    entries = "".join(
        _job(
            job,
            results.outcomes.get(job.id),
            results.diffs.get(job.id),
            results.status_of(job.id),
            results.pending_reason(job.id),
        )
        for job in results.ordered_jobs
    )
    return (
        '<h2 id="jobs">Jobs</h2><noscript><p class="detail">A job\'s inputs, steps, check output and log '
        "tail show when it is opened, which needs JavaScript; results.json beside this file has them.</p></noscript>"
        '<div class="controls">'
        f'{buttons}<input id="search" type="search" placeholder="filter by text">'
        '<button id="expand">expand / collapse</button><span id="filter-info" class="detail"></span></div>'
        f"{entries}"
    )


def _job(
    job: JobSpec,
    outcome: JobOutcome | None,
    diff: Mapping[str, Any] | None = None,
    status: str = "pending",
    pending_reason: str | None = None,
) -> str:
    status = outcome.status.value if outcome else status
    cost = fmt_cost(outcome.cost_usd) if outcome else ""
    turns = f"{outcome.num_turns} turns" if outcome and outcome.num_turns is not None else ""
    duration = format_duration(outcome.duration_s) if outcome and outcome.duration_s is not None else ""
    why = outcome.reason if outcome else pending_reason
    reason = f'<span class="reason">{escape(why)}</span>' if why else ""
    # A job that had a route out is not sandboxed like the rest: say so where it is listed.
    net = (
        '<span class="badge net" title="network = internet: this job had a route out">internet</span>'
        if job.network == "internet"
        else ""
    )
    if outcome is not None and outcome.reward is not None:
        net += f'<span class="badge reward" title="the verifier\'s reward">reward {fmt_reward(outcome.reward.value)}</span>'
    if job.task_image is not None:  # the task's own image, flower brought in
        shown = escape(job.task_image.describe(), quote=True)
        net += f'<span class="badge image" title="ran in {shown}">{escape(job.task_image.ref)}</span>'
    if job.root == "writable" or job.user == "root":  # asked for more than the sandbox (security.md)
        asked = ", ".join(
            [
                *(["writable root"] if job.root == "writable" else []),
                *(["uid 0"] if job.user == "root" else []),
            ]
        )
        net += f'<span class="badge net" title="the record\'s sandbox line says what this cost">{escape(asked)}</span>'
    summary = (
        f'<span class="id">{escape(job.id)}</span><span class="badge s-{status}">{status}</span>{net}'
        f"<span>{escape(cost)}</span><span>{escape(turns)}</span><span>{escape(duration)}</span>"
        f"{diff_summary_span(diff)}{reason}"
    )
    return (
        f'<details class="job" id="job-{escape(job.id)}" data-status="{status}" '
        f'data-task="{escape(job.task)}" data-variant="{escape(job.variant)}">'
        # The body is filled from the embedded document when opened (_job_body_js.py).
        f'<summary>{summary}</summary><div class="job-body"></div></details>'
    )
