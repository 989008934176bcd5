"""The limits options of every `flower` command, and the environment that stands in for them.

On a host: `flower --time-limit 3600 --budget-usd 5 "task"`. In a flower-batch job the
orchestrator sets the environment instead (it knows the job's timeout and budget). An option
typed wins over its variable. The environment is read here, once, as the command starts; the
runtime gets a `Limits` object (flower.runtime.limits). The variables' names are the runtime's
(flower.runtime.limit_env), where flower-batch finds them too.

==================  =====================  =========================================================
option              variable               meaning
==================  =====================  =========================================================
--deadline WHEN     FLOWER_DEADLINE        when time is up: epoch seconds or ISO 8601 (no zone = UTC)
--time-limit S      FLOWER_TIME_LIMIT      seconds allowed; alone: the deadline is now + S
--budget-usd USD    FLOWER_BUDGET_USD      USD the agent is told it may spend (`once`: -b, and a CLI cap)
(none)              FLOWER_SPENT_USD       USD already spent before this process (flower-batch's meter)
--wrap-up S         FLOWER_WRAP_UP         seconds after the deadline to write notes (default 60; 0 off)
--notices LIST      FLOWER_NOTICES         percentages that bring a notice (default 50,80,95); off
--notice-wording F  FLOWER_NOTICE_WORDING  a TOML file of the texts the agent reads
==================  =====================  =========================================================
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from flower.errors import ConfigError
from flower.runtime.limit_env import LIMIT_ENV
from flower.runtime.limits import DEFAULT_THRESHOLDS, DEFAULT_WRAP_UP_S, Limits, Wording, load_wording

OPTION = {
    "deadline": "--deadline",
    "time_limit": "--time-limit",
    "budget_usd": "--budget-usd",
    "wrap_up": "--wrap-up",
    "notices": "--notices",
    "notice_wording": "--notice-wording",
}

DeadlineOption = Annotated[
    str | None,
    typer.Option(
        "--deadline",
        show_default=False,
        help=f"when the time is up: epoch seconds or ISO 8601, e.g. 2026-12-02T07:30Z (${LIMIT_ENV['deadline']})",
    ),
]
TimeLimitOption = Annotated[
    float | None,
    typer.Option(
        "--time-limit",
        show_default=False,
        help=f"seconds this run may take; the agent is told what is left (${LIMIT_ENV['time_limit']})",
    ),
]
# What --budget-usd caps, said the same on every command: the dollars the agent is told it may
# spend (flower.runtime.limits). flower's runtime never stops for them; `once` also hands them to
# the CLI as the session's own cap (upstream's `once -b`).
BUDGET_TOLD = (
    "USD the agent is told it may spend: each session starts with what is left (this, minus"
    f" ${LIMIT_ENV['spent_usd']} and the cost the CLI reported for each turn), and notices come as"
    " shares of it are used"
)
BudgetOption = Annotated[
    float | None,
    typer.Option(
        "--budget-usd",
        show_default=False,
        help=f"{BUDGET_TOLD}; flower does not stop at it (under flower-batch the gateway refuses"
        f" requests past it) (${LIMIT_ENV['budget_usd']})",
    ),
]
OnceBudgetOption = Annotated[
    float | None,
    typer.Option(
        "--budget-usd",
        "-b",
        show_default=False,
        help=f"{BUDGET_TOLD}; and the Claude Code CLI ends the session once the session's own cost"
        " passes it (the SDK's max_budget_usd). -b is upstream's spelling of this same option"
        f" (${LIMIT_ENV['budget_usd']})",
    ),
]
WrapUpOption = Annotated[
    float | None,
    typer.Option(
        "--wrap-up",
        show_default=False,
        help=f"seconds after the deadline for the agent to write its notes (default 60, 0 = none; ${LIMIT_ENV['wrap_up']})",
    ),
]
NoticesOption = Annotated[
    str | None,
    typer.Option(
        "--notices",
        show_default=False,
        help=f"percent of time or budget used that bring a notice, e.g. 50,80,95; off = tell the agent nothing (${LIMIT_ENV['notices']})",
    ),
]
WordingOption = Annotated[
    Path | None,
    typer.Option(
        "--notice-wording",
        show_default=False,
        help=f"a TOML file with the texts the agent reads about its limits (${LIMIT_ENV['notice_wording']})",
    ),
]


@dataclass
class LimitArgs:
    """The limits options typed so far (the group's and the command's); None = not typed."""

    typed: dict[str, Any] = field(default_factory=dict)

    def record(self, **values: Any) -> None:
        self.typed.update({k: v for k, v in values.items() if v is not None})

    def reset(self) -> None:
        self.typed.clear()


ARGS = LimitArgs()


def record(
    deadline: str | None,
    time_limit: float | None,
    budget_usd: float | None,
    wrap_up: float | None,
    notices: str | None,
    notice_wording: Path | None,
) -> None:
    ARGS.record(
        deadline=deadline,
        time_limit=time_limit,
        budget_usd=budget_usd,
        wrap_up=wrap_up,
        notices=notices,
        notice_wording=notice_wording,
    )


def limits_from(typed: Mapping[str, Any], environ: Mapping[str, str], now: float | None = None) -> Limits:
    """The Limits of this process: each typed option, else its variable, else the default.

    Raises:
        ConfigError: a value that cannot be read (one line naming the option or variable).
    """
    now = time.time() if now is None else now

    def raw(key: str) -> tuple[Any, str] | None:
        if typed.get(key) is not None:
            return typed[key], OPTION.get(key, key)
        text = environ.get(LIMIT_ENV[key], "").strip()
        return (text, LIMIT_ENV[key]) if text else None

    time_limit = _number(raw("time_limit"), "seconds, e.g. 3600", positive=True)
    deadline = _deadline(raw("deadline"))
    if deadline is None and time_limit is not None:
        deadline = now + time_limit
    elif deadline is not None and time_limit is None:
        time_limit = max(1.0, deadline - now)
    budget = _number(raw("budget_usd"), "USD, e.g. 5 or 0.50", positive=True)
    spent = _number(raw("spent_usd"), "USD, e.g. 0.12") or 0.0
    wrap = _number(raw("wrap_up"), "seconds, e.g. 60 (0 = no wrap-up)")
    notices, thresholds = _notices(raw("notices"))
    wording_file = raw("notice_wording")
    wording = load_wording(wording_file[0]) if wording_file else Wording()
    return Limits(
        deadline=deadline,
        time_limit_s=time_limit,
        budget_usd=budget,
        spent_usd=spent,
        thresholds=thresholds,
        notices=notices,
        wrap_up_s=DEFAULT_WRAP_UP_S if wrap is None else wrap,
        wording=wording,
    )


def current_limits(environ: Mapping[str, str]) -> Limits:
    """The limits of this `flower` command: its options over the process's environment (as
    main() read it where the process started)."""
    return limits_from(ARGS.typed, environ)


def _number(given: tuple[Any, str] | None, example: str, *, positive: bool = False) -> float | None:
    if given is None:
        return None
    value, where = given
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}={value!r}: give {example}") from None
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        raise ConfigError(f"{where}={value!r}: give {example}")
    return number


def _deadline(given: tuple[Any, str] | None) -> float | None:
    if given is None:
        return None
    value, where = given
    text = str(value).strip()
    try:
        epoch = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(epoch) and 0 < epoch < 10**11:  # a time gmtime can print
            return epoch
        raise ConfigError(
            f"{where}={text!r}: give epoch seconds or an ISO 8601 time, e.g. 2026-12-02T07:30:00Z"
        )
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"{where}={text!r}: give epoch seconds or an ISO 8601 time, e.g. 2026-12-02T07:30:00Z"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _notices(given: tuple[Any, str] | None) -> tuple[bool, tuple[float, ...]]:
    if given is None:
        return True, DEFAULT_THRESHOLDS
    value, where = given
    text = str(value).strip().lower()
    if text in ("off", "none", "no", "0", "false"):
        return False, ()
    try:
        shares = tuple(sorted({float(p.strip().rstrip("%")) / 100 for p in text.split(",") if p.strip()}))
    except ValueError:
        shares = ()
    if not shares or any(not 0 < s < 1 for s in shares):
        raise ConfigError(f"{where}={value!r}: give percentages between 0 and 100, e.g. 50,80,95, or off")
    return True, shares
