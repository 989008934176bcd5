"""A writable-root job's whole state, kept: its container committed to an image of its own when
the container has ended (every process of it gone), so its hidden tests see every file the agent
changed, and `wake` continues from there (an apt-installed package is still installed).

One tag per job (`flower-batch-state:<batch>.<job>-<hash>`), labelled STATE_IMAGE; the record pins
the id. A new attempt's commit takes the tag over: the earlier image goes, unless the new one is
built on it (a wake), when Docker removes it with its child. `gc --images` removes them all.
"""

from __future__ import annotations

import hashlib
import re

from flower_batch.backend.base import Backend
from flower_batch.errors import FlowerBatchError
from flower_batch.labels import BUILD_KEY, STATE_IMAGE, TASK_BUILD, labels

REPOSITORY = "flower-batch-state"


def state_ref(home: str, batch: str, job: str) -> str:
    """The job's one tag: readable, and unique per home, batch and job (two homes on one engine
    never share one; a tag takes [a-z0-9_.-], 128 characters)."""
    readable = re.sub(r"[^a-z0-9_.-]+", "-", f"{batch}.{job}".lower())[:100].strip(".-") or "job"
    key = hashlib.sha256(f"{home}\0{batch}/{job}".encode()).hexdigest()[:12]
    return f"{REPOSITORY}:{readable}-{key}"


async def keep_state(backend: Backend, container: str, *, home: str, batch: str, lease: str, job: str) -> str:
    """The ended `container` committed: the image's id."""
    # A commit inherits its image's labels: blank the ones that say "built from these inputs", or
    # a later build of the task folder (or of the runtime) would find this state instead.
    found = {
        **labels(batch, lease, "state", job),
        STATE_IMAGE: f"{batch}/{job}",
        TASK_BUILD: "",
        BUILD_KEY: "",
    }
    return await backend.commit(container, state_ref(home, batch, job), found)


async def drop_state(backend: Backend, image_id: str | None) -> None:
    """An earlier attempt's state image, when nothing is built on it any more."""
    if not image_id:
        return
    try:
        await backend.remove_image(image_id)
    except FlowerBatchError:
        pass  # a wake's new state is its child, or a container still uses it: it goes with them
