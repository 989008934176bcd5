"""Every label flower-batch puts on what it makes, in one place every layer may import (the foundation).

On containers, networks, volumes and secrets, so `gc` can find them: MANAGED, BATCH, JOB, ROLE,
VERSION, LEASE (and SERVICE on a Swarm secret). On the runtime image, so a run can say what it ran
on: VERSION, SDK_VERSION, CLI_VERSION, BASE_IMAGE, BUILD_KEY.
"""

from __future__ import annotations

from . import __version__

MANAGED = "org.flower-batch.managed"
BATCH = "org.flower-batch.batch"
JOB = "org.flower-batch.job"
ROLE = "org.flower-batch.role"  # job | check | gateway | network | probe | warm | sweep | disk | disk-helper
VERSION = "org.flower-batch.version"  # flower-batch's version: on what it makes, and on the image
LEASE = "org.flower-batch.session"  # the orchestrator's lease that owns it (running/lease.py, gc)
SERVICE = "org.flower-batch.service"  # on each Swarm secret: the service it was made for
SDK_VERSION = "org.flower-batch.sdk-version"
CLI_VERSION = "org.flower-batch.cli-version"
BASE_IMAGE = "org.flower-batch.base-image"
BUILD_KEY = "org.flower-batch.build-key"  # the image's inputs, hashed (running/image.py)
# On the runtime image, "1": its flower's relay waits for the job's gateway socket to be bound, so
# on one machine a job's container starts beside its gateway (running/jobs.starts_beside).
RELAY_WAITS = "org.flower-batch.relay-waits"
# On an image built from a task's folder: the build's key (running/task_images.py); `gc --images`.
TASK_BUILD = "org.flower-batch.task-build"
# On an image flower-batch layered for a cluster (running/layered.py): "<task image id> <runtime
# image id>", the pair it was made from (the same pair is never layered twice); `gc --images`.
LAYERED = "org.flower-batch.layered"
# On the runtime bundle's volumes: the runtime build key they hold (not MANAGED: no batch owns them).
RUNTIME_BUNDLE = "org.flower-batch.runtime-bundle"
# On a writable-root job's container committed when it ended: "<batch>/<job>" (running/state_image.py;
# `wake` runs from it, `gc --images` removes it).
STATE_IMAGE = "org.flower-batch.state-image"


def labels(batch: str, lease: str, role: str, job: str | None = None) -> dict[str, str]:
    out = {MANAGED: "1", BATCH: batch, ROLE: role, VERSION: __version__, LEASE: lease}
    if job:
        out[JOB] = job
    return out
