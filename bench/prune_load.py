"""Load + prune of a 50,000-entry session from sessions.db vs reading the same transcript as JSONL.

    .venv/bin/python bench/prune_load.py [--entries 50000] [--repeat 3]

The transcript has the real CLI's shapes: a parentUuid chain of user prompts, assistant text,
tool_use / tool_result pairs, with a synthetic API error, its retry entries and a denied call
every few hundred entries (so prune has work to do). "jsonl" is what the CLI itself does on
resume: read the file, json-parse every line. "sqlite+prune" is what flower's resume does:
`PruningSessionStore.load()` = SELECT the rows, parse them, prune (drop, neutralise, relink).
Prints both times (best of --repeat) and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flower.context.pruning import PruningSessionStore, chain_problems  # noqa: E402
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


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


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

        loaded: list = []

        def load_and_prune() -> None:
            loaded[:] = asyncio.run(store.load(key)) or []  # type: ignore[arg-type]

        t_jsonl = best(read_jsonl, args.repeat)
        t_store = best(load_and_prune, args.repeat)
        inner.close()
        size_mb = jsonl.stat().st_size / 1e6
    assert not chain_problems(loaded), "prune broke the chain"
    print(f"entries {args.entries:,}  transcript {size_mb:.1f} MB  (best of {args.repeat})")
    print(f"jsonl read+parse      {t_jsonl * 1000:8.0f} ms")
    print(f"sqlite load+prune     {t_store * 1000:8.0f} ms  ({len(entries) - len(loaded):,} entries pruned)")
    print(f"ratio sqlite+prune / jsonl = {t_store / t_jsonl:.2f}")


if __name__ == "__main__":
    main()
