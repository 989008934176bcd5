"""The comparison as a rich Table for the terminal (rows = tasks, columns = variants)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from flower_batch.jobmodel.classes import describe_counts

from ._results import (
    BatchResults,
    fmt_cell_detail,
    fmt_ci,
    fmt_mean_reward,
    fmt_passed,
    fmt_rate,
    rate_class,
)
from ._stats import Cell

_STYLES = {"good": "bold green", "mid": "bold yellow", "bad": "bold red", "none": "dim"}


def comparison_table(results: BatchResults) -> Table:
    """Each cell: passed/n, pass rate, 95% interval; then mean cost, turns, duration."""
    c = results.comparison
    reward = " · mean reward (verifier)" if c.has_rewards else ""
    table = Table(
        title=Text(f"{results.batch} · model: {results.gateway_label}"),
        caption=f"pass rate over repeats [95% Wilson interval]{reward} · mean cost (metered at the gateway)"
        " · mean turns · mean duration",
        show_lines=True,
    )
    table.add_column("task", style="bold")
    for variant in c.variants:
        table.add_column(Text(variant))
    for task in c.tasks:
        table.add_row(Text(task, style="bold"), *(_cell_text(c.cell(task, v)) for v in c.variants))
    if len(c.tasks) > 1:
        table.add_row(
            Text("all tasks", style="italic"), *(_cell_text(c.variant_totals[v]) for v in c.variants)
        )
    return table


def summary_line(results: BatchResults) -> str:
    """e.g. `6/8 passed (75%) · mean reward 0.81 · total $0.0120 · model: scripted model` (the
    reward only where a verifier graded a job)."""
    overall = results.comparison.overall
    reward = fmt_mean_reward(overall)
    text = (
        f"{fmt_passed(overall)} passed ({fmt_rate(overall)})"
        + (f" · mean {reward}" if reward else "")
        + f" · total {_total_cost(overall)} · model: {results.gateway_label}"
    )
    classes = describe_counts(results.class_counts())
    return (
        text
        + (f" · {overall.pending} pending" if overall.pending else "")
        + (f" · {classes}" if classes else "")
    )


def _total_cost(cell: Cell) -> str:
    if cell.total_cost_usd is None:
        return "cost unknown"
    known = f" ({cell.cost_known}/{cell.n} known)" if cell.cost_known < cell.n else ""
    return f"${cell.total_cost_usd:.4f}{known}"


def _cell_text(cell: Cell | None) -> Text:
    if cell is None:
        return Text("—", style="dim")
    text = Text()
    text.append(fmt_passed(cell), style=_STYLES[rate_class(cell)])
    text.append(f"  {fmt_rate(cell)}", style=_STYLES[rate_class(cell)])
    if cell.ci95:
        text.append(f" [{fmt_ci(cell)}]", style="dim")
    text.append("\n" + fmt_cell_detail(cell), style="dim")
    return text
