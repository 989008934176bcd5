import pytest


@pytest.fixture
def anyio_backend():
    return "asyncio"


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
