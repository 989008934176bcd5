"""A `BatchDiff` as a terminal table and as Markdown (for $GITHUB_STEP_SUMMARY).

Both show the same strings, built here: base and new pass rates, the difference with its
interval, the p-value, the verdict, the mean cost / turns / duration deltas, and the job classes.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from flower_batch.jobmodel.units import format_duration

from .diff import IMPROVEMENT, NO_DATA, REGRESSION, BatchDiff, RowDiff, SideStats

_VERDICT_STYLE = {REGRESSION: "bold red", IMPROVEMENT: "bold green", NO_DATA: "dim"}
_VERDICT_MARK = {REGRESSION: "🔻 regression", IMPROVEMENT: "🟢 improvement"}


def fmt_side(s: SideStats) -> str:
    return f"{s.passed}/{s.n} ({s.pass_rate:.0%})" if s.n else "0 counted"


def fmt_difference(row: RowDiff) -> str:
    if row.difference is None or row.interval is None:
        return "-"
    low, high = row.interval
    return f"{row.difference * 100:+.0f} pts [{low * 100:+.0f}, {high * 100:+.0f}]"


def fmt_p(row: RowDiff) -> str:
    if row.p_value is None:
        return "-"
    return f"{row.p_value:.2g}" if row.p_value < 0.001 else f"{row.p_value:.3f}"


def fmt_cost_delta(row: RowDiff) -> str:
    d = row.cost_delta
    return "?" if d is None else f"{'+' if d >= 0 else '-'}${abs(d):.4f}"


def fmt_turns_delta(row: RowDiff) -> str:
    d = row.turns_delta
    return "?" if d is None else f"{d:+.1f}"


def fmt_duration_delta(row: RowDiff) -> str:
    d = row.duration_delta
    return "?" if d is None else ("+" if d >= 0 else "-") + format_duration(abs(d))


def fmt_reward_change(row: RowDiff) -> str:
    """`0.75 → 0.88 (+0.13)`: the mean reward of each side, where a verifier graded jobs."""
    base, new = row.base.mean_reward, row.new.mean_reward
    if base is None and new is None:
        return "-"
    shown = f"{'-' if base is None else f'{base:.2f}'} → {'-' if new is None else f'{new:.2f}'}"
    return shown + (f" ({row.reward_delta:+.2f})" if row.reward_delta is not None else "")


def fmt_classes(s: SideStats) -> str:
    return ", ".join(f"{count} {name}" for name, count in s.classes.items()) or "-"


def row_cells(row: RowDiff, rewards: bool = False) -> list[str]:
    """The strings of one row, in column order (see COLUMNS; with `rewards`, columns())."""
    cells = [
        row.name,
        fmt_side(row.base),
        fmt_side(row.new),
        fmt_difference(row),
        fmt_p(row),
        row.verdict,
        fmt_cost_delta(row),
        fmt_turns_delta(row),
        fmt_duration_delta(row),
        f"{fmt_classes(row.base)} → {fmt_classes(row.new)}",
    ]
    return [*cells[:-1], fmt_reward_change(row), cells[-1]] if rewards else cells


COLUMNS = [
    "cell",
    "base",
    "new",
    "Δ pass rate [interval]",
    "Fisher p",
    "verdict",
    "Δ cost/job",
    "Δ turns/job",
    "Δ duration/job",
    "classes (base → new)",
]


REWARD_COLUMN = "mean reward (base → new)"


def columns(diff: BatchDiff) -> list[str]:
    """COLUMNS, with the mean reward before the classes when a verifier graded jobs."""
    return [*COLUMNS[:-1], REWARD_COLUMN, COLUMNS[-1]] if diff.has_rewards else COLUMNS


def _level(diff: BatchDiff) -> str:
    return f"{1 - diff.alpha:.0%}"


def diff_table(diff: BatchDiff) -> Table:
    table = Table(  # Text, not str: a path or variant name is never taken for rich markup
        title=Text(f"{diff.new.label} vs baseline {diff.base.label} · model: {diff.new.gateway_label}"),
        caption=Text(
            f"{diff.rule}. Δ in percentage points with its {_level(diff)} Newcombe interval; "
            "cost, turns and duration are means per job."
        ),
        show_lines=False,
    )
    for column in columns(diff):
        table.add_column(
            Text(column), no_wrap=column in ("cell", "verdict")
        )  # Text: "[interval]" is no style
    # Regressions first, in a section of their own (what a reader of a nightly looks for, as in
    # report.html), then the other rows in their usual groups.
    rest = [
        tuple(r for r in g if r.verdict != REGRESSION) for g in (diff.cells, diff.variants, (diff.overall,))
    ]
    groups = [g for g in (diff.regressions, *rest) if g]
    for i, group in enumerate(groups):
        for j, row in enumerate(group):
            cells = row_cells(row, diff.has_rewards)
            style = _VERDICT_STYLE.get(row.verdict)
            texts = [Text(c, style=style or "") if k == 5 else Text(c) for k, c in enumerate(cells)]
            if row.task is None:
                texts[0].stylize("italic")
            table.add_row(*texts, end_section=j == len(group) - 1 and i < len(groups) - 1)
    return table


def one_sided_lines(diff: BatchDiff) -> list[str]:
    lines = []
    if diff.only_base:
        lines.append("only in the baseline: " + ", ".join(f"{t} × {v}" for t, v in diff.only_base))
    if diff.only_new:
        lines.append("only in the new batch: " + ", ".join(f"{t} × {v}" for t, v in diff.only_new))
    return lines


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def diff_markdown(diff: BatchDiff) -> str:
    """GitHub-flavoured Markdown: a heading, the verdict line, the table, one-sided cells, the rule."""
    status = "❌ regression" if diff.regressions else "✅ no regression"
    lines = [
        f"### flower-batch: {_md(diff.new.label)} vs baseline {_md(diff.base.label)} — {status}",
        "",
        f"{_md(diff.headline())}. Model: {_md(diff.new.gateway_label)} (baseline: {_md(diff.base.gateway_label)}).",
        "",
        "| " + " | ".join(columns(diff)) + " |",
        "|" + "|".join("---" for _ in columns(diff)) + "|",
    ]
    for row in diff.verdict_first:
        cells = [_md(c) for c in row_cells(row, diff.has_rewards)]
        cells[5] = _VERDICT_MARK.get(row.verdict, cells[5])
        if row.task is None:
            cells[0] = f"**{cells[0]}**"
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- {_md(line)}" for line in one_sided_lines(diff)]
    lines.append(
        f"\n<sub>{_md(diff.rule)}. Δ in percentage points with its {_level(diff)} Newcombe interval; "
        "cost, turns and duration are means per job.</sub>\n"
    )
    return "\n".join(lines)
