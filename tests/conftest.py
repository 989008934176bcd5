import os

import pytest


@pytest.fixture
def anyio_backend():
    return "asyncio"


def pytest_configure(config: pytest.Config) -> None:
    """GNU readline, imported while pytest starts, exports its COLUMNS=80 and LINES=24 into the
    process's C environment (not os.environ): every child inherits them, xdist's workers too,
    whose rich consoles are then 80 wide whatever a test's COLUMNS says. Children get the
    environment pytest was started with."""
    for name in ("COLUMNS", "LINES"):
        if name not in os.environ:
            os.unsetenv(name)


# -- parallel workers (pytest-xdist, `make test`: -n N --dist loadgroup) --------------------------
# What runs where: every swarm test on one worker (one cluster, brought up once: its lock is
# per process), the tests of a module-scoped fixture on one worker (it is made once, and its
# fixed batch names are not cleaned up under another worker's feet), every other test alone.
# The order hands out the long ones first (Docker, then the swarm group, then slow) and the unit
# tests last, to fill the gaps; it is the same in every worker, as xdist requires.
def _group(item: pytest.Item) -> str | None:
    if item.get_closest_marker("swarm") is not None:
        return "swarm"
    defs = getattr(item, "_fixtureinfo", None)
    if defs is not None and any(d[-1].scope == "module" for d in defs.name2fixturedefs.values() if d):
        return item.nodeid.split("::")[0]
    return None


def _rank(item: pytest.Item) -> int:
    if item.get_closest_marker("swarm") is not None:
        return 1
    if item.get_closest_marker("docker") is not None:
        return 0
    return 2 if item.get_closest_marker("slow") is not None else 3


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    if hasattr(config, "workerinput"):
        items.sort(key=_rank)  # stable: collection order within a rank


def pytest_collection_finish(session: pytest.Session) -> None:
    """With swarm tests selected, bring their cluster up in the background right away, so that it
    is up by the time they run (by one process: the only one, or xdist's first worker)."""
    worker = getattr(session.config, "workerinput", {}).get("workerid")
    if worker not in (None, "gw0") or session.config.option.collectonly:
        return
    if any(item.get_closest_marker("swarm") is not None for item in session.items):
        from tests.batch_fixtures.swarm import start_in_background

        start_in_background()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The session that started a background bring-up ends after it (a session cut short by -x
    or a failure would otherwise leave it holding the cluster, and `make cluster-down` refused)."""
    if hasattr(session.config, "workerinput"):
        return  # the controller waits, once every worker is done
    from tests.batch_fixtures.swarm import BRING_UP_S, PREFIX
    from tests.batch_fixtures.swarm_lock import ClusterLock, bring_up_path

    if not bring_up_path(PREFIX).exists():
        return
    lock = ClusterLock(PREFIX, bring_up_path(PREFIX))
    lock.exclusive(timeout=BRING_UP_S)
    lock.release()


@pytest.fixture(autouse=True)
def _swarm_cluster_stays(request):
    """After each swarm test: if the test cluster went away meanwhile, say so and why, rather than
    leave the next tests to fail as an unreachable engine."""
    yield
    if request.node.get_closest_marker("swarm") is None:
        return
    from tests.batch_fixtures.swarm import PREFIX, still_there

    why = still_there()
    if why is not None:
        pytest.fail(f"the test cluster {PREFIX} went away during this test: {why}", pytrace=False)
