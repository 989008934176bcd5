"""The job's limits as the agent sees them: its deadline, its budget, and notices on the way.

A Runtime given `Limits` (from `flower --time-limit/--deadline/--budget-usd`, or from the
environment flower-batch sets, read once in flower.cli.limits) tells the agent:

* at the start of every session (each CLI process: a new step, a resume, a handoff successor),
  the time and the budget left, in front of the prompt it sends;
* once a share of either is used (50%, 80%, 95% by default), a notice: through a PostToolUse
  hook's ``additionalContext`` while a turn runs (the CLI puts it in the next request), else in
  front of the next prompt the runtime sends;
* at the deadline, that time is up: the runtime interrupts the turn and asks for notes (the
  engine's time-up phases, flower.runtime.attempt).

The budget's spend is what was spent before this process (`spent_usd`: flower-batch passes the
gateway's metered spend of the job's earlier runs) plus the cost the CLI reports at the end of
each turn in this process. So a budget notice comes at a turn's end, a time notice at any tool
call. Everything here is pure: the clock and the spend are arguments.
"""

from __future__ import annotations

import os
import string
import time
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from flower.catalogue.runtime import (
    LIMITS_BUDGET,
    LIMITS_JOIN,
    LIMITS_NOTES,
    LIMITS_NOTICE,
    LIMITS_START,
    LIMITS_TIME,
    LIMITS_TIME_UP,
    LIMITS_WHAT_BUDGET,
    LIMITS_WHAT_TIME,
)
from flower.catalogue.terminal import LIMITS_SUMMARY_BUDGET, LIMITS_SUMMARY_JOIN, LIMITS_SUMMARY_TIME
from flower.errors import ConfigError

DEFAULT_THRESHOLDS = (0.5, 0.8, 0.95)
DEFAULT_WRAP_UP_S = 60.0
TIME, BUDGET = "time", "budget"


@dataclass(frozen=True)
class Wording:
    """Every text the agent reads about its limits; each field one key of a wording file."""

    start: str = LIMITS_START
    time: str = LIMITS_TIME
    budget: str = LIMITS_BUDGET
    join: str = LIMITS_JOIN
    notice: str = LIMITS_NOTICE
    what_time: str = LIMITS_WHAT_TIME
    what_budget: str = LIMITS_WHAT_BUDGET
    notes: str = LIMITS_NOTES
    time_up: str = LIMITS_TIME_UP


# The placeholders each text may use (a wording file naming another is refused when loaded).
PLACEHOLDERS: dict[str, frozenset[str]] = {
    "start": frozenset({"parts"}),
    "time": frozenset({"time_left", "deadline"}),
    "budget": frozenset({"budget_left", "budget", "spent"}),
    "join": frozenset(),
    "notice": frozenset({"what", "percent", "left"}),
    "what_time": frozenset(),
    "what_budget": frozenset(),
    "notes": frozenset({"path"}),
    "time_up": frozenset({"deadline", "seconds", "path"}),
}


def load_wording(path: str | os.PathLike[str]) -> Wording:
    """A TOML file of texts (any of Wording's keys, at its top level) over the defaults.

    Raises:
        ConfigError: unreadable file, an unknown key, a value that is not text, a placeholder
            the text cannot use.
    """
    where = Path(path)
    try:
        data = tomllib.loads(where.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read the notice wording: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from None
    known = {f.name for f in fields(Wording)}
    texts: dict[str, str] = {}
    for key, value in data.items():
        if key not in known:
            raise ConfigError(f"{where}: unknown key {key!r}; use one of {', '.join(sorted(known))}")
        if not isinstance(value, str):
            raise ConfigError(f"{where}: {key} must be a string, not {type(value).__name__}")
        bad = _placeholders(value) - PLACEHOLDERS[key]
        if bad:
            allowed = ", ".join("{" + p + "}" for p in sorted(PLACEHOLDERS[key])) or "none"
            raise ConfigError(f"{where}: {key} uses {{{sorted(bad)[0]}}}; it may use {allowed}")
        texts[key] = value
    return replace(Wording(), **texts)


def _placeholders(text: str) -> set[str]:
    try:
        return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError as exc:  # an unbalanced brace
        raise ConfigError(
            f"bad braces in notice wording {text[:40]!r}: {exc} (write {{{{ for a brace)"
        ) from None


@dataclass(frozen=True)
class Limits:
    """What the runtime knows of the job's limits. Nothing set: the agent is told nothing."""

    deadline: float | None = None
    """When time is up, in epoch seconds."""
    time_limit_s: float | None = None
    """The whole time allowance, so that "50% used" means something; default: from now."""
    budget_usd: float | None = None
    spent_usd: float = 0.0
    """Spent before this process (flower-batch: the gateway's meter of the job's earlier runs)."""
    thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS
    """Shares of time or budget that bring a notice; empty: no notices."""
    notices: bool = True
    """False: the agent is told nothing (the deadline's wrap-up still happens)."""
    wrap_up_s: float = DEFAULT_WRAP_UP_S
    """Seconds the agent gets, after the deadline, to write its notes; 0: no wrap-up."""
    wording: Wording = field(default_factory=Wording)

    def __post_init__(self) -> None:
        for t in self.thresholds:
            if not 0 < t < 1:
                raise ConfigError(f"notice threshold {t!r}: give a share between 0 and 1 (0.5 = 50%)")
        if self.budget_usd is not None and self.budget_usd <= 0:
            raise ConfigError(f"budget {self.budget_usd!r}: give a positive number of USD")
        if self.wrap_up_s < 0:
            raise ConfigError(f"wrap-up {self.wrap_up_s!r}: give seconds >= 0")

    @property
    def active(self) -> bool:
        return self.deadline is not None or self.budget_usd is not None

    def time_left(self, now: float) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - now)

    def time_used(self, now: float) -> float | None:
        """The share of the time used (0..1), or None without a deadline."""
        if self.deadline is None or not self.time_limit_s or self.time_limit_s <= 0:
            return None
        return min(1.0, max(0.0, 1.0 - (self.deadline - now) / self.time_limit_s))

    def spent(self, here: float) -> float:
        return self.spent_usd + here

    def budget_used(self, here: float) -> float | None:
        if self.budget_usd is None:
            return None
        return min(1.0, max(0.0, self.spent(here) / self.budget_usd))

    def past_deadline(self, now: float) -> bool:
        return self.deadline is not None and now >= self.deadline

    def wrap_up_end(self) -> float | None:
        return None if self.deadline is None else self.deadline + self.wrap_up_s


def crossed(before: float, now: float, thresholds: tuple[float, ...]) -> float | None:
    """The highest threshold t with before < t <= now (one notice, even for a jump past two)."""
    passed = [t for t in thresholds if before < t <= now]
    return max(passed) if passed else None


def limits_summary(lim: Limits, now: float, spent_here: float) -> str:
    """The time and budget left, as the person reads them (the agent's wording may be any
    language: `Wording`)."""
    parts = []
    if lim.deadline is not None:
        left = format_duration(lim.time_left(now) or 0)
        parts.append(LIMITS_SUMMARY_TIME.format(time_left=left, deadline=format_deadline(lim.deadline)))
    if lim.budget_usd is not None:
        spent = lim.spent(spent_here)
        parts.append(
            LIMITS_SUMMARY_BUDGET.format(
                budget_left=format_usd(max(0.0, lim.budget_usd - spent)),
                budget=format_usd(lim.budget_usd),
                spent=format_usd(spent),
            )
        )
    return LIMITS_SUMMARY_JOIN.join(parts)


def format_duration(seconds: float) -> str:
    """`1h 05m`, `12m 30s`, `45s`: what a person (or an agent) reads at a glance."""
    s = max(0, int(seconds))
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s}s"


def format_usd(amount: float) -> str:
    """Cents for a dollar or more; four decimals below, so a $0.05 budget reads sensibly."""
    return f"{amount:.2f}" if abs(amount) >= 1 else f"{amount:.4f}"


def format_deadline(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


class LimitWatch:
    """Which notices the agent has had, across the steps of one process."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.announced = {TIME: 0.0, BUDGET: 0.0}  # the highest share the agent was told of

    def opening(self, now: float, spent_here: float, notes: Path | None = None) -> str:
        """What goes in front of a session's first prompt ("" when there is nothing to say):
        the notice of a share crossed since the agent was last told (a budget share crossed
        at the end of the previous step, say), then the time and budget left. The shares used
        are told here, so the thresholds below them bring no later notice."""
        lim, w = self.limits, self.limits.wording
        if not lim.notices or not lim.active:
            return ""
        parts = []
        if lim.deadline is not None:
            left = format_duration(lim.time_left(now) or 0)
            parts.append(w.time.format(time_left=left, deadline=format_deadline(lim.deadline)))
        if lim.budget_usd is not None:
            spent = lim.spent(spent_here)
            parts.append(
                w.budget.format(
                    budget_left=format_usd(max(0.0, lim.budget_usd - spent)),
                    budget=format_usd(lim.budget_usd),
                    spent=format_usd(spent),
                )
            )
        crossed_now = self.check(now, spent_here)  # shares crossed since the last session
        self._mark(now, spent_here)
        text = w.start.format(parts=w.join.join(parts))
        if crossed_now:
            text = crossed_now + "\n" + text
        if notes is not None:
            text += "\n" + w.notes.format(path=notes)
        return text

    def check(self, now: float, spent_here: float) -> str:
        """Notices for thresholds crossed since the last call ("" when none)."""
        lim, w = self.limits, self.limits.wording
        if not lim.notices or not lim.thresholds:
            return ""
        out = []
        for kind, used in ((TIME, lim.time_used(now)), (BUDGET, lim.budget_used(spent_here))):
            if used is None:
                continue
            hit = crossed(self.announced[kind], used, lim.thresholds)
            if hit is None:
                continue
            self.announced[kind] = max(self.announced[kind], used)
            out.append(
                w.notice.format(
                    what=w.what_time if kind == TIME else w.what_budget,
                    percent=round(hit * 100),
                    left=self._left(kind, now, spent_here),
                )
            )
        return "\n".join(out)

    def time_up(self, now: float, path: Path) -> str:
        """The prompt that ends the work at the deadline and asks for the notes."""
        lim = self.limits
        end = lim.wrap_up_end() or now
        return lim.wording.time_up.format(
            deadline=format_deadline(lim.deadline or now), seconds=max(1, int(end - now)), path=path
        )

    def _left(self, kind: str, now: float, spent_here: float) -> str:
        lim = self.limits
        if kind == TIME:
            return format_duration(lim.time_left(now) or 0)
        assert lim.budget_usd is not None
        return "$" + format_usd(max(0.0, lim.budget_usd - lim.spent(spent_here)))

    def _mark(self, now: float, spent_here: float) -> None:
        for kind, used in ((TIME, self.limits.time_used(now)), (BUDGET, self.limits.budget_used(spent_here))):
            if used is not None:
                self.announced[kind] = max(self.announced[kind], used)
