"""The live table of a large matrix shows what fits on the screen, the running jobs first."""

from __future__ import annotations

import io

from rich.console import Console

from flower_batch.commands.matrix import MatrixProgress


def _rendered(progress: MatrixProgress, console: Console) -> str:
    console.print(progress.render())
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


def test_a_large_matrix_shows_the_running_jobs_and_how_many_more() -> None:
    console = Console(file=io.StringIO(), force_terminal=False, width=100, height=40)
    ids = [f"noop.r{i}" for i in range(1, 513)]
    progress = MatrixProgress(ids, {}, console)
    for job in ids[400:410]:
        progress.on_state(job, "running")
    progress.on_state("noop.r1", "passed")
    out = _rendered(progress, console).split("matrix ·", 1)[1]
    assert len(out.splitlines()) <= 40
    for job in ids[400:410]:
        assert f"{job} " in out and "running" in out
    assert out.index("noop.r401 ") < out.index("noop.r1 ")  # running first, then the plan's order
    shown = sum(f"{job} " in out for job in ids)
    assert shown == 40 - 8 and f"… and {512 - shown} more" in out


def test_a_small_matrix_is_shown_whole() -> None:
    console = Console(file=io.StringIO(), force_terminal=False, width=100, height=40)
    progress = MatrixProgress(["a", "b", "c"], {"c": "passed"}, console)
    out = _rendered(progress, console)
    assert all(f"│ {job} " in out for job in "abc") and "more" not in out
