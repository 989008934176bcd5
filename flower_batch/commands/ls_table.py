"""The `ls` table, fitted to the terminal without ever cutting a job id: the id is what a person
copies into `show`, `wake` and `repro`. At narrow widths the other columns go first — the least
useful dropped (DROPPABLE), the batch moved into the title when every row shares it, what is left
wrapped — and a job id longer than the terminal is printed whole all the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from flower_batch.commands.common import status_cell
from flower_batch.harbor.shown import fmt_reward
from flower_batch.jobmodel.units import format_duration

COLUMNS = ("batch", "job", "status", "reward", "cost (metered)", "turns", "time", "model", "image", "wakes")
DROPPABLE = ("wakes", "image", "model", "time", "turns", "cost (metered)", "reward")  # dropped in this order
# shown only when a row has one: a task's own image (docs/environments.md), a verifier's reward
# (docs/harbor-tasks.md)
OPTIONAL = ("image", "reward")
MIN_BATCH = 8
BORDER = 3  # a column's padding and its rule: "│ x │" costs its text and 3 more, the table 1


def cells(row: Mapping[str, Any]) -> dict[str, str]:
    """One row of `ls` as plain text per column (the status as its word; coloured when drawn)."""
    cost = row.get("cost_usd")
    return {
        "batch": row["batch"],
        "job": row["job"],
        "status": row["status"],
        "reward": "" if row.get("reward") is None else fmt_reward(row["reward"]),
        "cost (metered)": "" if cost is None else f"${cost:.4f}" + ("" if row.get("metered") else " (CLI)"),
        "turns": str(row.get("num_turns") or ""),
        "time": format_duration(row.get("duration_s") or 0),
        "model": row.get("gateway_mode") or "",
        "image": (row.get("task_image") or {}).get("ref") or "",
        "wakes": str(row.get("attempt", 1) - 1) if row.get("persistent") else "-",
    }


def _full(column: str, rows: Sequence[Mapping[str, str]]) -> int:
    return max([len(column), *(len(r[column]) for r in rows)])


def _least(column: str, rows: Sequence[Mapping[str, str]]) -> int:
    """The narrowest a column may be drawn: an id or a status whole, a batch folded to MIN_BATCH,
    the rest wrapped at their spaces."""
    if column in ("job", "status"):
        return _full(column, rows)
    if column == "batch":
        return min(MIN_BATCH, _full(column, rows))
    return max(len(word) for text in [column, *(r[column] for r in rows)] for word in text.split())


def _total(widths: Mapping[str, int]) -> int:
    return sum(w + BORDER for w in widths.values()) + 1


def fitted(rows: Sequence[Mapping[str, str]], width: int) -> tuple[dict[str, int], bool]:
    """Column -> its drawn width at a terminal `width` wide, and whether the batch moved into
    the title. Their total exceeds `width` only when the job ids alone do."""
    shown = [c for c in COLUMNS if c not in OPTIONAL or any(r[c] for r in rows)]
    least = {c: _least(c, rows) for c in shown}

    def fits(columns: Sequence[str]) -> bool:  # the batch counted whole: folding it is the last resort
        return _total({c: _full(c, rows) if c == "batch" else least[c] for c in columns}) <= width

    for column in [c for c in DROPPABLE if c in shown]:
        if fits(shown):
            break
        shown.remove(column)
    batch_in_title = not fits(shown) and len({r["batch"] for r in rows}) == 1
    if batch_in_title:
        shown.remove("batch")
    widths = {c: _full(c, rows) for c in shown}
    for column in [c for c in shown if c not in ("job", "status", "batch")] + ["batch"]:
        if column in widths and _total(widths) > width:
            widths[column] = max(least[column], widths[column] - (_total(widths) - width))
    return widths, batch_in_title


def ls_table(rows: Sequence[Mapping[str, Any]], width: int) -> tuple[Table, int]:
    """The table, and the width to draw it at: the terminal's, or more when a job id is wider
    (the line then runs past the edge; the id is never cut)."""
    texts = [cells(r) for r in rows]
    widths, batch_in_title = fitted(texts, width)
    title = f"jobs ({len(rows)})" + (f" · batch {texts[0]['batch']}" if batch_in_title else "")
    table = Table(title=Text(title))
    for column, drawn in widths.items():
        table.add_column(column, width=drawn, no_wrap=column in ("job", "status"), overflow="fold")
    for t in texts:
        # Values are file text (a job id may hold `[`): never markup; the status is our own word.
        table.add_row(*(status_cell(t[c]) if c == "status" else Text(t[c]) for c in widths))
    return table, max(width, _total(widths))


def wider(console: Console, width: int) -> Console:
    """`console` drawing `width` columns wide (rich never draws wider than its console)."""
    return Console(
        file=console.file,
        width=width,
        highlight=False,
        soft_wrap=console.soft_wrap,
        color_system=console.color_system,  # type: ignore[arg-type]  # the same names
        force_terminal=console.is_terminal,
        no_color=console.no_color,
    )
