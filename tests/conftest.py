import os
import shutil
import tempfile
from pathlib import Path

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


# -- parallel workers: tests/parallel.py ----------------------------------------------------------
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None  # an explicit other --dist is left to xdist
    from tests.parallel import GroupScheduling

    config.option.loadscopereorder = False  # the order conftest gives, not by group size
    return GroupScheduling(config, log, _groups_file(config))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    from tests.parallel import GROUPS_INPUT

    node.workerinput[GROUPS_INPUT] = str(_groups_file(node.config))  # type: ignore[attr-defined]


def _groups_file(config: pytest.Config) -> Path:
    if not hasattr(config, "_fb_groups_file"):
        folder = Path(tempfile.mkdtemp(prefix="fb-test-groups-"))
        config._fb_groups_file = folder / "groups.json"  # type: ignore[attr-defined]
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    return config._fb_groups_file  # type: ignore[attr-defined]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A swarm test's setup may wait for the cluster's bring-up (in the background since the session
    # began, minutes on a fresh machine): pytest-timeout times their bodies only; the wait is
    # bounded by the cluster fixture's own time limits (tests/batch_fixtures/swarm.py).
    for item in items:
        if item.get_closest_marker("swarm") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(config.getini("timeout"), func_only=True))
    if hasattr(config, "workerinput"):
        from tests.parallel import rank

        items.sort(key=rank)  # stable: collection order within a rank


@pytest.hookimpl(tryfirst=True)  # before xdist reports the collection to the controller
def pytest_collection_finish(session: pytest.Session) -> None:
    """The first worker tells the controller the groups; with swarm tests selected, the cluster
    comes up in the background right away, so that it is up by the time they run (started by one
    process: the only one, or xdist's first worker)."""
    workerinput = getattr(session.config, "workerinput", {})
    if workerinput.get("workerid") not in (None, "gw0"):
        return
    if "flower_batch_test_groups" in workerinput:
        from tests.parallel import write_groups

        write_groups(session.items, Path(workerinput["flower_batch_test_groups"]))
    if session.config.option.collectonly:
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
