"""A two-step workflow for the subprocess continuity tests (`flower run tests/scripts/continuity_flow.py:flow`).

FLOWER_TEST_PAUSE_FILE: if set, step 2's `when` creates that file and sleeps, so a test can
kill the process *between* the steps.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from flower import AgentSpec, Step, Workflow

SPEC = AgentSpec("worker", instructions="ROLE=worker", allowed_tools=["Read"])


def _pause_between(ctx: dict) -> bool:
    marker = os.environ.get("FLOWER_TEST_PAUSE_FILE")
    if marker:
        Path(marker).write_text("between the steps\n")
        time.sleep(float(os.environ.get("FLOWER_TEST_PAUSE_S", "60")))
    return True


flow = Workflow(
    [
        Step("查资料", SPEC, "read the note and remember it", resume_prompt="continue the reading"),
        Step("写结论", SPEC, "write the conclusion", when=_pause_between),
    ]
)
