"""Two plots for the HTML report, drawn as inline SVG by hand (no library, nothing fetched).

    pass rate per variant    a bar per variant with its 95% Wilson interval as an error bar
    cost against pass rate   a point per variant: mean cost per job (x) and pass rate (y),
                             with the same interval as a vertical bar

Both read the batch's one `Comparison` (the variant totals), so they show exactly the numbers
of the table. Every label is escaped: variant names come from the jobs file.
"""

from __future__ import annotations

import math
from html import escape

from ._results import fmt_cost
from ._stats import Cell, Comparison

PLOTS_CSS = """
.plots { display: flex; gap: 24px; flex-wrap: wrap; align-items: flex-start; }
.plots figure { margin: 0; } .plots figcaption { color: #57606a; font-size: 12px; max-width: 520px; }
svg.plot text { font: 11px system-ui, sans-serif; fill: #1f2328; } svg.plot .axis { stroke: #57606a; }
svg.plot .grid { stroke: #d0d7de; stroke-dasharray: 2 3; } svg.plot .bar { fill: #54aeff; }
svg.plot .err { stroke: #1f2328; stroke-width: 1.5; } svg.plot .pt { fill: #0969da; stroke: white; }
"""

_TOP, _BOTTOM, _LEFT, _RIGHT = 20, 70, 48, 16
_H = 220  # plot area height


def plots_section(comparison: Comparison) -> str:
    """The <h2>Plots</h2> section, or "" when no variant has a finished job yet."""
    totals = comparison.variant_totals
    if not any(c.n for c in totals.values()):
        return ""
    return (
        '<h2>Plots</h2><div class="plots">'
        f"<figure>{pass_rate_svg(totals)}<figcaption>Pass rate per variant over all its tasks and repeats; "
        "the error bar is the 95% Wilson interval.</figcaption></figure>"
        f"<figure>{cost_vs_pass_svg(totals)}<figcaption>Mean cost per job (metered by the gateway) against "
        "pass rate, one point per variant, with the 95% interval.</figcaption></figure></div>"
    )


def _label(text: str, limit: int = 16) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _y(rate: float) -> float:
    return _TOP + _H * (1 - rate)


def _y_axis(width: float) -> list[str]:
    parts = []
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        y = _y(tick)
        parts.append(f'<line class="grid" x1="{_LEFT}" y1="{y:.1f}" x2="{width - _RIGHT}" y2="{y:.1f}"/>')
        parts.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:.0%}</text>')
    parts.append(f'<line class="axis" x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + _H}"/>')
    parts.append(f'<line class="axis" x1="{_LEFT}" y1="{_TOP + _H}" x2="{width - _RIGHT}" y2="{_TOP + _H}"/>')
    return parts


def _error_bar(x: float, cell: Cell, cap: float = 6) -> str:
    if cell.ci95 is None:
        return ""
    lo, hi = _y(cell.ci95[0]), _y(cell.ci95[1])
    return (
        f'<g class="ci" data-low="{cell.ci95[0]:.4f}" data-high="{cell.ci95[1]:.4f}">'
        f'<line class="err" x1="{x:.1f}" y1="{hi:.1f}" x2="{x:.1f}" y2="{lo:.1f}"/>'
        f'<line class="err" x1="{x - cap:.1f}" y1="{hi:.1f}" x2="{x + cap:.1f}" y2="{hi:.1f}"/>'
        f'<line class="err" x1="{x - cap:.1f}" y1="{lo:.1f}" x2="{x + cap:.1f}" y2="{lo:.1f}"/></g>'
    )


def pass_rate_svg(totals: dict[str, Cell]) -> str:
    variants = [v for v, c in totals.items() if c.n]
    slot = 56
    width = _LEFT + _RIGHT + slot * max(len(variants), 4)
    height = _TOP + _H + _BOTTOM
    parts = _y_axis(width)
    for i, variant in enumerate(variants):
        cell = totals[variant]
        rate = cell.pass_rate or 0.0
        x = _LEFT + slot * i + slot / 2
        name = escape(variant)
        parts.append(
            f'<g class="variant" data-variant="{name}" data-rate="{rate:.4f}"><title>{name}: {cell.passed}/{cell.n} '
            f"passed</title>"
            f'<rect class="bar" x="{x - 16:.1f}" y="{_y(rate):.1f}" width="32" height="{_H * rate:.1f}"/>'
            f"{_error_bar(x, cell)}"
            f'<text x="{x:.1f}" y="{_y(rate) - 4 if cell.ci95 is None else _y(cell.ci95[1]) - 4:.1f}" '
            f'text-anchor="middle">{rate:.0%}</text>'
            f'<text x="{x:.1f}" y="{_TOP + _H + 14}" text-anchor="end" transform="rotate(-35 {x:.1f} {_TOP + _H + 14})">'
            f"{escape(_label(variant))}</text></g>"
        )
    return (
        f'<svg class="plot" id="plot-pass-rate" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="pass rate per variant">'
        f"{''.join(parts)}</svg>"
    )


def _nice_max(value: float) -> float:
    """A round axis end at or above value (1, 2, 2.5 or 5 times a power of ten)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value)


def cost_vs_pass_svg(totals: dict[str, Cell]) -> str:
    known = [(v, c) for v, c in totals.items() if c.n and c.mean_cost_usd is not None]
    unknown = [v for v, c in totals.items() if c.n and c.mean_cost_usd is None]
    width, plot_w = 480, 480 - _LEFT - 40  # room for the last cost label
    height = _TOP + _H + _BOTTOM
    top = _nice_max(max((c.mean_cost_usd or 0.0 for _, c in known), default=0.0))
    parts = _y_axis(width)
    for k in range(5):
        cost = top * k / 4
        x = _LEFT + plot_w * k / 4
        parts.append(
            f'<text x="{x:.1f}" y="{_TOP + _H + 14}" text-anchor="middle">{escape(fmt_cost(cost))}</text>'
        )
    parts.append(
        f'<text x="{_LEFT + plot_w / 2:.1f}" y="{_TOP + _H + 32}" text-anchor="middle">mean cost per job</text>'
    )
    for variant, cell in known:
        x = _LEFT + plot_w * (cell.mean_cost_usd or 0.0) / top
        rate = cell.pass_rate or 0.0
        name = escape(variant)
        parts.append(
            f'<g class="variant" data-variant="{name}" data-rate="{rate:.4f}" data-cost="{cell.mean_cost_usd:.6f}">'
            f"<title>{name}: {rate:.0%} at {escape(fmt_cost(cell.mean_cost_usd))} per job</title>"
            f'{_error_bar(x, cell, cap=4)}<circle class="pt" cx="{x:.1f}" cy="{_y(rate):.1f}" r="5"/>'
            f'<text x="{x + 8:.1f}" y="{_y(rate) - 6:.1f}">{escape(_label(variant, 20))}</text></g>'
        )
    if unknown:
        names = escape(", ".join(unknown))
        parts.append(f'<text class="unknown" x="{_LEFT}" y="{height - 10}">cost unknown: {names}</text>')
    return (
        f'<svg class="plot" id="plot-cost-pass" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="cost against pass rate">'
        f"{''.join(parts)}</svg>"
    )
