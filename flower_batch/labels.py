"""Labels on every container, network and volume flower-batch makes, so `gc` can find them."""

from __future__ import annotations

from . import __version__

MANAGED = "org.flower-batch.managed"
BATCH = "org.flower-batch.batch"
JOB = "org.flower-batch.job"
ROLE = "org.flower-batch.role"  # job | check | gateway
VERSION = "org.flower-batch.version"
SESSION = "org.flower-batch.session"  # the orchestrator process that owns it (see gc)


def labels(batch: str, session: str, role: str, job: str | None = None) -> dict[str, str]:
    out = {MANAGED: "1", BATCH: batch, ROLE: role, VERSION: __version__, SESSION: session}
    if job:
        out[JOB] = job
    return out
