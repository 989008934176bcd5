"""The environment names of the job's limits: the one spelling of each `FLOWER_*` limit variable.

flower reads them where a command starts (flower.cli.limits, into a `Limits`); flower-batch sets
them in a job's container (flower_batch.running.deadline). Both import them from here, the
runtime, so the orchestrator depends on flower's runtime for them and never on its command line.
"""

from __future__ import annotations

DEADLINE_ENV = "FLOWER_DEADLINE"
TIME_LIMIT_ENV = "FLOWER_TIME_LIMIT"
BUDGET_USD_ENV = "FLOWER_BUDGET_USD"
SPENT_USD_ENV = "FLOWER_SPENT_USD"
WRAP_UP_ENV = "FLOWER_WRAP_UP"
NOTICES_ENV = "FLOWER_NOTICES"
NOTICE_WORDING_ENV = "FLOWER_NOTICE_WORDING"

LIMIT_ENV = {
    "deadline": DEADLINE_ENV,
    "time_limit": TIME_LIMIT_ENV,
    "budget_usd": BUDGET_USD_ENV,
    "spent_usd": SPENT_USD_ENV,
    "wrap_up": WRAP_UP_ENV,
    "notices": NOTICES_ENV,
    "notice_wording": NOTICE_WORDING_ENV,
}
"""Each `Limits` input (as flower.cli.limits names it) -> the variable that stands in for it."""
