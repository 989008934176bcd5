"""Pre-flight's import check runs once per (image, target, bytes): a target seen to load is not
imported again in another container, and any change to what it imports checks it again."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from flower_batch.backend.base import ContainerSpec
from flower_batch.preflight.import_cache import ImportCache
from flower_batch.preflight.imports import Target, import_problems


class ImportingEngine:
    """The part of a Backend the import check uses; it 'imports' every target whose module
    text says GOOD and fails the others, and counts its containers."""

    def __init__(self) -> None:
        self.containers: list[ContainerSpec] = []
        self.staged: list[str] = []

    async def create(self, spec: ContainerSpec) -> str:
        self.containers.append(spec)
        staging = Path(spec.mounts[0].source)
        mounted = {m.target: Path(m.source) for m in spec.mounts[1:]}  # flows/ copies, as they are
        argv = spec.command[3:]
        self.staged = []
        for i in range(0, len(argv), 2):
            folder, target = argv[i], argv[i + 1]
            where = mounted.get(folder, staging / folder.rsplit("/", 1)[1])
            text = "".join(p.read_text() for p in where.rglob("*.py"))
            self.staged.append(
                json.dumps({"target": target, "ok": True})
                if "GOOD" in text
                else json.dumps({"target": target, "error": "boom"})
            )
        return str(len(self.containers))

    async def start(self, cid: str) -> None:
        return None

    async def wait(self, cid: str, timeout: float | None = None) -> int:
        return 0

    async def logs(self, cid: str, follow: bool = False) -> AsyncIterator[str]:
        for line in self.staged:
            yield line

    async def remove(self, cid: str, force: bool = True) -> None:
        return None


def target(path: Path) -> Target:
    return Target(written=f"{path.name}:main", label=f"workflow {path.name}", source=path, rel=path.name)


def check(engine: ImportingEngine, home: Path, image: str, *targets: Target) -> list[str]:
    seen = ImportCache(home)

    async def go() -> list[str]:
        return await import_problems(engine, image, list(targets), labels={}, seen=seen)  # type: ignore[arg-type]

    problems = anyio.run(go)
    seen.commit()  # as the command does once the whole pre-flight passed
    return problems


def test_nothing_is_written_before_commit(tmp_path: Path) -> None:
    home, engine = tmp_path / "home", ImportingEngine()
    good = tmp_path / "good.py"
    good.write_text("GOOD = 1\n")
    seen = ImportCache(home)

    async def go() -> list[str]:
        return await import_problems(engine, "sha256:i", [target(good)], labels={}, seen=seen)  # type: ignore[arg-type]

    assert anyio.run(go) == [] and seen.pending and not home.exists()  # a refused command: home untouched
    seen.commit()
    assert seen.known("sha256:i", target(good))


def test_a_target_seen_to_load_is_not_imported_again(tmp_path: Path) -> None:
    home, engine = tmp_path / "home", ImportingEngine()
    good = tmp_path / "good.py"
    good.write_text("GOOD = 1\n")
    assert check(engine, home, "sha256:img1", target(good)) == []
    assert check(engine, home, "sha256:img1", target(good)) == []
    assert len(engine.containers) == 1  # the second check needed no container
    check(engine, home, "sha256:img2", target(good))  # another image: checked again
    assert len(engine.containers) == 2
    good.write_text("GOOD = 2\n")  # other bytes: checked again
    check(engine, home, "sha256:img1", target(good))
    assert len(engine.containers) == 3


def test_a_target_that_failed_is_checked_every_time_and_only_it(tmp_path: Path) -> None:
    home, engine = tmp_path / "home", ImportingEngine()
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text("GOOD = 1\n")
    bad.write_text("raise SystemExit\n")
    assert check(engine, home, "sha256:i", target(good), target(bad)) == ["workflow bad.py: boom"]
    assert check(engine, home, "sha256:i", target(good), target(bad)) == ["workflow bad.py: boom"]
    assert len(engine.containers) == 2
    assert len(engine.containers[1].command[3:]) == 2  # the second one imported only bad.py


def test_a_flows_copy_is_keyed_by_its_whole_tree(tmp_path: Path) -> None:
    home, engine = tmp_path / "home", ImportingEngine()
    flows = tmp_path / "flows"
    flows.mkdir()
    (flows / "flow.py").write_text("GOOD = 1\nimport helper\n")
    (flows / "helper.py").write_text("x = 1\n")
    copy = Target(written="flow.py:main", label="job flows", flows_dir=flows)
    assert check(engine, home, "sha256:i", copy) == []
    assert check(engine, home, "sha256:i", copy) == []
    assert len(engine.containers) == 1
    (flows / "helper.py").write_text("x = 2\n")  # a module it imports changed
    assert check(engine, home, "sha256:i", copy) == []
    assert len(engine.containers) == 2
