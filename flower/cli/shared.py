"""The options every `flower` command takes, declared once: the global options (-w, -r, -v,
-W, -T; flower.cli.common) and the limits (flower.cli.limits).

`@shared_options()` adds them to a command's signature after its own options, with "not
typed" defaults (None / False), and records what was typed (`set_globals`, `record_limits`)
before the command's body runs; so typing one after the subcommand overrides the group's, and
not typing it leaves what was typed before the subcommand. The app's group declares them with
their defaults (flower.cli.app).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

from flower.cli.common import (
    RunDirOption,
    TrimOption,
    VerboseOption,
    WorkbenchOption,
    WorkspaceOption,
    set_globals,
)
from flower.cli.limits import (
    BudgetOption,
    DeadlineOption,
    NoticesOption,
    TimeLimitOption,
    WordingOption,
    WrapUpOption,
)
from flower.cli.limits import record as record_limits

GLOBAL_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("workspace", WorkspaceOption, None),
    ("run_dir", RunDirOption, None),
    ("verbose", VerboseOption, False),
    ("workbench", WorkbenchOption, False),
    ("trim", TrimOption, False),
)
LIMIT_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("deadline", DeadlineOption, None),
    ("time_limit", TimeLimitOption, None),
    ("budget_usd", BudgetOption, None),
    ("wrap_up", WrapUpOption, None),
    ("notices", NoticesOption, None),
    ("notice_wording", WordingOption, None),
)


def shared_options(budget: Any = BudgetOption) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The global and limits options added to a command; `budget`: its --budget-usd (`once`
    takes upstream's -b too, flower.cli.limits.OnceBudgetOption)."""
    limits = tuple((name, budget if name == "budget_usd" else kind, d) for name, kind, d in LIMIT_OPTIONS)
    shared = GLOBAL_OPTIONS + limits

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(command)
        def with_options(*args: Any, **kwargs: Any) -> None:
            typed = {name: kwargs.pop(name) for name, _, _ in shared}
            set_globals(*(typed[name] for name, _, _ in GLOBAL_OPTIONS))
            record_limits(**{name: typed[name] for name, _, _ in limits})
            command(*args, **kwargs)

        own = inspect.signature(command, eval_str=True)
        added = [
            inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=a)
            for n, a, d in shared
        ]
        with_options.__signature__ = own.replace(  # type: ignore[attr-defined]
            parameters=[*own.parameters.values(), *added]
        )
        with_options.__annotations__ = {
            **get_type_hints(command, include_extras=True),
            **{name: kind for name, kind, _ in shared},
        }
        return with_options

    return decorate
