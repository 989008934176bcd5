"""Trim on load and spill: large tool results become pointers, the text lands in files intact."""

from __future__ import annotations

import copy
import hashlib
import re

import anyio
import pytest
from claude_agent_sdk import InMemorySessionStore

from flower.context.pruning import PruningSessionStore, prune, result_text, tool_results
from flower.context.trim import Trimmer, spill
from tests.flower.context.test_pruning import KEY, Transcript, assert_chain_ok

POINTER = re.compile(r"^\[(trimmed|spilled): (\d+) chars → (\S+\.txt); first 400 chars: (.*)\]$", re.S)


def big(n: int, size: int) -> str:
    line = f"line {n}: " + "x" * 70 + "\n"
    return (line * (size // len(line) + 1))[:size]


def session(sizes: list[int]) -> tuple[Transcript, list[str]]:
    t = Transcript()
    t.prompt("read everything")
    ids = []
    for n, size in enumerate(sizes):
        tool_id = t.call("Read", {"file_path": f"/work/ws/f{n}"})
        t.result(tool_id, big(n, size))
        ids.append(tool_id)
    t.say("read them all")
    return t, ids


def results(entries) -> dict[str, str]:
    return {b["tool_use_id"]: result_text(b) for e in entries for b in tool_results(e)}


def test_old_large_results_become_pointers_and_files_hold_the_text(tmp_path):
    sizes = [5000] * 25 + [1999, 2000, 100]
    t, ids = session(sizes)
    before = copy.deepcopy(t.entries)
    out = Trimmer(tmp_path / "trimmed")(t.entries)
    assert t.entries == before  # input untouched

    texts = results(out)
    originals = results(t.entries)
    large = [i for i, s in zip(ids, sizes, strict=True) if s >= 2000]  # 26 of them
    trimmed, kept = large[:-20], large[-20:]
    assert len(trimmed) == 6
    for tool_id in trimmed:
        m = POINTER.match(texts[tool_id])
        assert m, texts[tool_id]
        verb, n, path, head = m.groups()
        original = originals[tool_id]
        assert verb == "trimmed" and int(n) == len(original) and head == original[:400]
        assert path == str(tmp_path / "trimmed" / f"{hashlib.sha256(original.encode()).hexdigest()[:16]}.txt")
        assert open(path, encoding="utf-8").read() == original  # nothing lost
    for tool_id in kept + [ids[25], ids[27]]:  # newest 20 large ones, and the small ones
        assert texts[tool_id] == originals[tool_id]
    assert [e.get("uuid") for e in out] == [e.get("uuid") for e in t.entries]
    assert_chain_ok(out)


def test_idempotent_and_content_addressed(tmp_path):
    t, _ = session([3000] * 24)
    trim = Trimmer(tmp_path)
    once = trim(t.entries)
    assert trim(once) == once
    assert trim(t.entries) == once
    assert len(list(tmp_path.glob("*.txt"))) == 4
    assert not list(tmp_path.glob(".tmp-*"))


def test_nothing_to_trim_returns_the_same_list(tmp_path):
    t, _ = session([3000] * 20 + [10])
    assert Trimmer(tmp_path)(t.entries) is t.entries
    assert not tmp_path.exists() or not list(tmp_path.iterdir())


def test_parameters_and_non_text_results(tmp_path):
    t = Transcript()
    t.prompt("look")
    image = t.call("Read", {"file_path": "/work/ws/p.png"})
    t.result(
        image,
        [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 9000}}],
    )
    blocks = t.call("Read", {"file_path": "/work/ws/b"})
    t.result(blocks, [{"type": "text", "text": "a" * 600}, {"type": "text", "text": "b" * 600}])
    small = t.call("Read", {"file_path": "/work/ws/s"})
    t.result(small, "tiny")
    t.say("ok")
    out = Trimmer(tmp_path, min_chars=1000, keep_newest=0)(t.entries)
    texts = results(out)
    assert texts[image] is None  # images are left alone
    assert texts[blocks].startswith("[trimmed: 1201 chars")
    assert texts[small] == "tiny"


def test_as_the_pruning_store_hook(tmp_path):
    t, ids = session([2500] * 22)
    t.api_retry(1)
    t.synthetic_error()

    async def load():
        inner = InMemorySessionStore()
        await inner.append(KEY, t.entries)
        return await PruningSessionStore(inner, trim=Trimmer(tmp_path)).load(KEY)

    out = anyio.run(load)
    assert out == Trimmer(tmp_path)(prune(t.entries))
    texts = results(out)
    assert [tool_id for tool_id in ids if texts[tool_id].startswith("[trimmed: ")] == ids[:2]


def test_spill_over_threshold(tmp_path):
    text = big(1, 4001)
    pointer = spill(text, tmp_path)
    m = POINTER.match(pointer)
    assert m and m.group(1) == "spilled" and int(m.group(2)) == 4001 and m.group(4) == text[:400]
    path = tmp_path.resolve() / "spill" / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.txt"
    assert m.group(3) == str(path)
    assert path.read_text(encoding="utf-8") == text
    assert spill(text, tmp_path) == pointer  # same text, same file


@pytest.mark.parametrize("size", [0, 10, 4000])
def test_spill_under_threshold_returns_none(tmp_path, size):
    assert spill("y" * size, tmp_path) is None
    assert not (tmp_path / "spill").exists()


def test_spill_leaves_pointers_alone_and_unicode_survives(tmp_path):
    text = "结果：" + "数据" * 3000
    pointer = spill(text, tmp_path, threshold=100)
    assert spill(pointer + "x" * 5000, tmp_path, threshold=100) is None
    path = POINTER.match(pointer).group(3)
    assert open(path, encoding="utf-8").read() == text
