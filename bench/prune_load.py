"""Load + prune of a 50,000-entry session from sessions.db vs reading the same transcript as JSONL.

    .venv/bin/python bench/prune_load.py [--entries 50000] [--repeat 3]

The transcript has the real CLI's shapes: a parentUuid chain of user prompts, assistant text,
tool_use / tool_result pairs, with a synthetic API error, its retry entries and a denied call
every few hundred entries (so prune has work to do). "jsonl" is what the CLI itself does on
resume: read the file, json-parse every line. "sqlite+prune" is what flower's resume does:
`PruningSessionStore.load()` = SELECT the rows, parse them, prune (drop, neutralise, relink).
Prints the times (best of --repeat, wall and CPU) and the ratios.

The two sides are timed interleaved (one of each per round) so that load from other processes on
a shared machine falls on both alike; CPU time (all threads of this process) is printed beside
wall time because it is far less sensitive to that load.

Two baselines: "json.loads" is the plain stdlib read; "store's parser" reads the JSONL with the
same parser as sessions.db's loader (flower.context.rows: orjson, the cyclic GC paused), so that
ratio shows what prune and SQLite add, not what the faster parser saves. Not counted on either
side: the CLI's own walk of the parentUuid chain after reading (it does it on both paths), and
the SDK's writing of the loaded entries to a temporary JSONL for the CLI (only flower's path
pays that; printed on its own line).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flower.context.pruning import PruningSessionStore, chain_problems  # noqa: E402
from flower.context.rows import parse_rows  # noqa: E402
from flower.context.store import SQLiteSessionStore  # noqa: E402

SID = "5b0c3f5e-0000-4000-8000-000000000000"


def transcript(n: int) -> list[dict]:
    entries: list[dict] = []
    parent: str | None = None

    def add(kind: str, message: dict, **extra) -> None:
        nonlocal parent
        uid = str(uuid.uuid4())
        entries.append(
            {
                "type": kind,
                "uuid": uid,
                "parentUuid": parent,
                "sessionId": SID,
                "isSidechain": False,
                "timestamp": "2026-11-30T10:00:00.000Z",
                "cwd": "/work/proj",
                "version": "2.1.327",
                "message": message,
                **extra,
            }
        )
        parent = uid

    i = 0
    while len(entries) < n:
        i += 1
        tool_id = f"toolu_{i:08d}"
        if i % 300 == 0:  # a failed turn: retry entries and a synthetic error message
            add("system", {"role": "system", "content": "retry"}, subtype="api_error", level="error")
            add(
                "assistant",
                {
                    "role": "assistant",
                    "model": "<synthetic>",
                    "id": f"msg_e{i}",
                    "content": [{"type": "text", "text": "API Error: Connection refused"}],
                },
                isApiErrorMessage=True,
                error="server_error",
            )
        add("user", {"role": "user", "content": f"step {i}: look at module {i % 97}"})
        add(
            "assistant",
            {
                "role": "assistant",
                "model": "claude",
                "id": f"msg_{i}",
                "usage": {"input_tokens": 1000 + i, "cache_read_input_tokens": 20_000},
                "content": [{"type": "text", "text": f"Reading module {i % 97} now."}],
            },
        )
        command = f"touch out{i}.txt" if i % 250 == 0 else f"cat src/module_{i % 97}.py"
        add(
            "assistant",
            {
                "role": "assistant",
                "model": "claude",
                "id": f"msg_{i}",
                "content": [
                    {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}
                ],
            },
        )
        if i % 250 == 0:  # a denied call
            add(
                "user",
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": tool_id,
                            "is_error": True,
                            "content": "touch needs approval",
                        }
                    ],
                },
                toolDenialKind="user-rejected",
                permissionDecision={"decision": "reject", "source": "config"},
            )
        else:
            body = f"# module {i % 97}\n" + "def f(x):\n    return x * 2\n" * 8
            add(
                "user",
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": body}],
                },
                toolUseResult={"stdout": body},
            )
    return entries[:n]


def timed(fn) -> tuple[float, float]:
    """(wall, CPU) seconds of one call, from a settled heap. Its result is dropped before the
    next call, as the SDK drops the loaded entries once it has written them out, so the objects
    a side parsed with the collector paused leave no collection owed to whatever runs next."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    elapsed = time.perf_counter() - wall, time.process_time() - cpu
    del result
    return elapsed


def best_interleaved(fns: dict, repeat: int) -> dict[str, tuple[float, float]]:
    """Best wall and best CPU time of each function, running one of each per round."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            runs[name].append(timed(fn))
    return {name: (min(w for w, _ in r), min(c for _, c in r)) for name, r in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    entries = transcript(args.entries)
    with tempfile.TemporaryDirectory(prefix="flower-bench-") as tmp:
        jsonl = Path(tmp) / f"{SID}.jsonl"
        jsonl.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries))
        inner = SQLiteSessionStore(Path(tmp) / "sessions.db")
        key = {"project_key": "-work-proj", "session_id": SID}
        asyncio.run(inner.append(key, entries))  # type: ignore[arg-type]
        store = PruningSessionStore(inner)

        def read_jsonl() -> list[dict]:
            with open(jsonl, encoding="utf-8") as f:
                return [json.loads(line) for line in f]

        def read_jsonl_fast() -> list[dict]:
            with open(jsonl, "rb") as f:
                return parse_rows(f)

        def load_and_prune() -> list:
            return asyncio.run(store.load(key)) or []  # type: ignore[arg-type]

        def materialise() -> None:  # what the SDK does with the loaded entries before the CLI starts
            with open(Path(tmp) / "materialised.jsonl", "w", encoding="utf-8") as f:
                for e in loaded:
                    f.write(json.dumps(e, separators=(",", ":")))
                    f.write("\n")

        n = len(entries)
        del entries
        gc.freeze()  # the bench's own objects: no side's collection should walk them
        t = best_interleaved(
            {"plain": read_jsonl, "fast": read_jsonl_fast, "store": load_and_prune}, args.repeat
        )
        loaded = load_and_prune()
        t["materialise"] = best_interleaved({"m": materialise}, args.repeat)["m"]
        inner.close()
        size_mb = jsonl.stat().st_size / 1e6
    assert not chain_problems(loaded), "prune broke the chain"
    print(f"entries {args.entries:,}  transcript {size_mb:.1f} MB  (best of {args.repeat}, interleaved)")
    print(f"{'':34s} {'wall':>8s} {'cpu':>8s}")
    lines = [
        ("jsonl read+parse (json.loads)", "plain"),
        ("jsonl read+parse (store's parser)", "fast"),
        ("sqlite load+prune", "store"),
    ]
    for label, name in lines:
        wall, cpu = t[name]
        print(f"{label:34s} {wall * 1000:6.0f} ms {cpu * 1000:6.0f} ms")
    print(f"({n - len(loaded):,} entries pruned)")
    wall, cpu = t["materialise"]
    print(f"{'(SDK writes them out: not counted)':34s} {wall * 1000:6.0f} ms {cpu * 1000:6.0f} ms")
    for label, name in (("json.loads", "plain"), ("store's parser", "fast")):
        ratio_wall, ratio_cpu = t["store"][0] / t[name][0], t["store"][1] / t[name][1]
        print(f"ratio sqlite+prune / jsonl ({label}) = {ratio_wall:.2f} wall, {ratio_cpu:.2f} cpu")


if __name__ == "__main__":
    main()
