"""container.log of a long job is capped per run: head and tail kept, the last lines always, every
line cut to a bound (the output is hostile); the check's output capped the same way in memory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from flower_batch.backend.base import ContainerSpec
from flower_batch.outputlines import MAX_LINE_BYTES, LineSplitter, cut_line
from flower_batch.running import joblog
from flower_batch.running.joblog import ELIDED_MARK, HEAD_BYTES, TAIL_BYTES, CappedLog, capped_text
from flower_batch.running.runner import save_logs
from tests.fake_backend import FakeBackend, Script


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
    assert [line for line in got if line.startswith("--- container run")] == [
        "--- container run0 ---",
        "--- container run1 ---",
    ]
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


def test_one_huge_last_line_is_cut_and_the_file_stays_under_the_caps(tmp_path: Path) -> None:
    path = tmp_path / "container.log"
    huge = "z" * (24 * 1024 * 1024)  # one 24 MB line with no newline: the attacker's output
    with CappedLog(path, head_bytes=HEAD_BYTES, tail_bytes=TAIL_BYTES) as log:
        log.write_line("before")
        log.write_line(huge)
    del huge
    size = path.stat().st_size
    assert size <= HEAD_BYTES + TAIL_BYTES + 1024
    got = path.read_text().splitlines()
    assert got[0] == "before" and len(got) == 2
    assert got[1].startswith("zzz") and got[1].endswith(" more bytes of this line cut]")
    assert len(got[1].encode()) <= MAX_LINE_BYTES


def test_huge_lines_in_head_and_tail_are_each_cut(tmp_path: Path) -> None:
    path = tmp_path / "container.log"
    with CappedLog(path, head_bytes=4096, tail_bytes=8192) as log:
        for i in range(40):
            log.write_line(f"{i:03d}" + "é" * 100_000)  # 200 KB each, multi-byte characters
    text = path.read_text()
    assert len(text.encode()) <= 4096 + 8192 + 1024
    got = text.splitlines()
    assert got[0].startswith("000é") and "more bytes of this line cut]" in got[0]
    assert got[-1].startswith("039é") and any(line.startswith(ELIDED_MARK) for line in got)


def test_check_output_is_capped_in_memory() -> None:
    async def output() -> AsyncIterator[str]:
        yield "first"
        for i in range(50_000):
            yield f"{i:06d} " + "c" * 40
        yield "x" * 10_000_000
        yield "last"

    text = anyio.run(capped_text, output(), 2048, 4096)
    assert len(text.encode()) <= 2048 + 4096 + 1024
    lines = text.splitlines()
    assert lines[0] == "first" and lines[-1] == "last"
    assert any("more bytes of this line cut]" in line for line in lines)
    assert any(line.startswith(ELIDED_MARK) and "the check's output" in line for line in lines)


def test_a_short_check_output_is_kept_as_it_came() -> None:
    async def output() -> AsyncIterator[str]:
        for line in ("ok 1", "", "ok 2"):
            yield line

    assert anyio.run(capped_text, output()) == "ok 1\n\nok 2"


def test_the_line_splitter_never_carries_more_than_its_limit() -> None:
    splitter = LineSplitter(limit=1000, strip_cr=True)
    got = list(splitter.feed(b"a\r\nb"))
    for _ in range(10_000):  # 10 MB of one line, arriving in chunks
        got += splitter.feed(b"y" * 1000)
    got += splitter.feed("é\nnext".encode())
    got += splitter.rest()
    assert got[:1] == ["a"] and got[2] == "next" and len(got) == 3
    assert got[1].startswith("byyy") and got[1].endswith(" more bytes of this line cut]")
    assert len(got[1].encode()) <= 1000
    assert f"{10_000 * 1000 + 1 + 2 - (1000 - 64)} more bytes" in got[1]
    assert cut_line("short") == "short" and len(cut_line("w" * 100_000, 500).encode()) <= 500
