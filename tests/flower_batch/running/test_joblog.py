"""container.log of a long job is capped per run: head and tail kept, the last lines always."""

from __future__ import annotations

from pathlib import Path

import anyio

from flower_batch.backend import ContainerSpec
from flower_batch.backend.fake import FakeBackend, Script
from flower_batch.running import joblog
from flower_batch.running.joblog import ELIDED_MARK, HEAD_BYTES, TAIL_BYTES, CappedLog
from flower_batch.running.runner import save_logs


def lines(n: int, width: int = 60) -> list[str]:
    return [f"line {i:06d} " + "x" * width for i in range(n)]


def test_a_short_run_is_kept_whole(tmp_path: Path) -> None:
    path = tmp_path / "container.log"
    with CappedLog(path, head_bytes=10_000, tail_bytes=10_000) as log:
        for line in lines(50):
            log.write_line(line)
    assert path.read_text().splitlines() == lines(50)


def test_a_long_run_keeps_its_head_and_its_tail_to_the_last_line(tmp_path: Path) -> None:
    path = tmp_path / "container.log"
    every = lines(20_000)
    with CappedLog(path, head_bytes=4096, tail_bytes=16_384) as log:
        for line in every:
            log.write_line(line)
    text = path.read_text()
    got = text.splitlines()
    assert len(text.encode()) <= 4096 + 16_384 + 200
    marker = next(i for i, line in enumerate(got) if line.startswith(ELIDED_MARK))
    assert got[:marker] == every[:marker]  # the head, as it came
    kept_tail = got[marker + 1 :]
    assert kept_tail == every[-len(kept_tail) :] and kept_tail[-1] == every[-1]
    assert len("\n".join(kept_tail)) >= 16_384 - 200  # the tail is as long as the cap allows
    dropped = len(every) - marker - len(kept_tail)
    assert f"{dropped} lines" in got[marker]
    assert text[-4000:] == ("\n".join(every) + "\n")[-4000:]  # what the record's log tail shows


def test_each_run_is_capped_apart_and_a_wake_adds_a_section(tmp_path: Path) -> None:
    path = tmp_path / "container.log"
    for run in range(2):
        with CappedLog(path, head_bytes=1000, tail_bytes=2000) as log:
            log.write_line(f"--- container run{run} ---")
            for line in lines(500):
                log.write_line(line)
    got = path.read_text().splitlines()
    assert [line for line in got if line.startswith("--- container run")] == ["--- container run0 ---", "--- container run1 ---"]
    assert sum(line.startswith(ELIDED_MARK) for line in got) == 2
    assert got[-1] == lines(500)[-1]


def test_the_runner_saves_a_long_containers_output_capped(tmp_path: Path, monkeypatch) -> None:
    assert HEAD_BYTES == 1024 * 1024 and TAIL_BYTES == 4 * 1024 * 1024  # as documented (README)
    monkeypatch.setattr(joblog, "HEAD_BYTES", 20_000)
    monkeypatch.setattr(joblog, "TAIL_BYTES", 80_000)
    n = 10_000  # 400 KB: well past both caps
    output = [f"{i:08d} " + "y" * 30 for i in range(n)]

    async def go() -> None:
        async with FakeBackend(programs={"talk": Script(log_lines=output)}) as backend:
            cid = await backend.create(ContainerSpec(image=FakeBackend.IMAGE, command=["talk"]))
            await backend.start(cid)
            await backend.wait(cid)
            await save_logs(backend, cid, tmp_path / "container.log")

    anyio.run(go)
    path = tmp_path / "container.log"
    size = path.stat().st_size
    assert size <= 20_000 + 80_000 + 1000 < len("\n".join(output))
    got = path.read_text().splitlines()
    assert got[0].startswith("--- container ") and got[1] == output[0]
    assert got[-1] == output[-1] and any(line.startswith(ELIDED_MARK) for line in got)
