"""How the suite runs in parallel workers (pytest-xdist, `make test`: -n N).

xdist's own `--dist loadgroup` reads `xdist_group` marks by suffixing node ids, which pytest 9
no longer lets a plugin do (the suffix never appears, every test is scheduled alone). So the
grouping is done here: the first worker writes each grouped test's group to a file the controller
names (`pytest_configure_node`), before it reports its collection; the controller's scheduler
(`GroupScheduling`, xdist's load-scope scheduling with these groups as scopes) reads it when it
hands out the work.

What runs where: every swarm test on one worker (one cluster, its lock is per process), the
tests of a module-scoped fixture on one worker (the fixture is made once, and its fixed batch
names are not raced by another worker), every other test alone. The order hands out the long ones
first (Docker, then the swarm group, then slow) and the unit tests last, to fill the gaps; it is
the same in every worker, as xdist requires.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

GROUPS_INPUT = "flower_batch_test_groups"  # workerinput key: the file the first worker writes


def group(item: pytest.Item) -> str | None:
    if item.get_closest_marker("swarm") is not None:
        return "swarm"
    info = getattr(item, "_fixtureinfo", None)
    if info is not None and any(d[-1].scope == "module" for d in info.name2fixturedefs.values() if d):
        return item.nodeid.split("::")[0]
    return None


def rank(item: pytest.Item) -> int:
    # The swarm group is the longest unit by far (one worker runs all of it in turn): handed out
    # first, it starts while the other workers take the Docker tests, instead of after all of them.
    if item.get_closest_marker("swarm") is not None:
        return 0
    if item.get_closest_marker("docker") is not None:
        return 1
    return 2 if item.get_closest_marker("slow") is not None else 3


def write_groups(items: list[pytest.Item], path: Path) -> None:
    groups = {item.nodeid: g for item in items if (g := group(item)) is not None}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(groups))
    tmp.replace(path)


class GroupScheduling(LoadScopeScheduling):
    """Load-scope scheduling whose scopes are the groups above (a test of no group: its own)."""

    def __init__(self, config: pytest.Config, log: object, groups_file: Path) -> None:
        super().__init__(config, log)  # type: ignore[arg-type]
        self._groups_file = groups_file
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # read once every worker has reported its collection
            self._groups = json.loads(self._groups_file.read_text())
        return self._groups.get(nodeid, nodeid)
