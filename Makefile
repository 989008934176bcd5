# One entry point per task; every target works on a fresh clone (Debian/Ubuntu with Docker running).
UV ?= uv
PY := .venv/bin/python
FB := .venv/bin/flower-batch

.PHONY: prereqs setup image test test-flaky test-fast test-docker test-swarm lint demo demo-flow demo-go bench clean cluster-up cluster-down cluster-push

prereqs:          ## uv (PyPI), debootstrap (base and test-cluster images without a registry), chromium (report test)
	@scripts/install-prereqs.sh

setup: prereqs .venv/.synced  ## install the locked Python deps into .venv, compiled
	@$(PY) -m compileall -q flower flower_batch

# Bytecode compiled at install: uv does not compile by default, and where PYTHONDONTWRITEBYTECODE
# is set nothing ever writes it, so every command and test process compiled typer, docker,
# requests and rich from source again (about 0.5 s of CPU each; 7 s of a `run` under load).
.venv/.synced: uv.lock pyproject.toml
	$(UV) sync --frozen --compile-bytecode
	@touch $@

image: setup      ## build (or reuse) the pinned runtime image; prints its id
	$(FB) image build

# The suite runs in parallel workers (pytest-xdist): the Docker tests mostly wait on containers,
# so more workers than the 2 cores of the reference machine pay off. tests/parallel.py schedules
# them: all swarm tests on one worker (one cluster), a module-scoped fixture's tests on one
# worker, the long ones handed out first and the unit tests last, to fill the gaps.
# TEST_WORKERS=N to change it, PYTEST_XDIST= for one process.
TEST_WORKERS ?= 4
PYTEST_XDIST ?= -n $(TEST_WORKERS)

# `make test`: the swarm tests' 3-node cluster (scripts/cluster/up.sh) comes up in the
# background while the image builds, then the suite runs (9 min 16 s from a clean clone on a
# 2-core machine, aim 12; the swarm tests wait for the cluster, then find it up). The slowest
# tests are listed at the end: where the next minutes are.
# The task-image tests' Debian 11 and 13 images (tests/batch_fixtures/task_images.py, debootstrap
# + docker import, about 80 s the first time on a machine) are made in the background too.
# While the image builds, one collection writes pytest's rewritten test modules to __pycache__
# (PYTHONDONTWRITEBYTECODE, set on these machines, stops that): each worker then loads them
# instead of rewriting every assert again, about 15 s of CPU a worker.
test: setup       ## the whole suite, Docker and swarm tests included (the swarm ones use the 3-node test cluster)
	@$(PY) -m tests.batch_fixtures.swarm_background start --cluster-only
	@$(PY) -m tests.batch_fixtures.task_images >/dev/null 2>&1 &
	@PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q --collect-only -p no:xdist >/dev/null 2>&1 & \
	  $(FB) image build; built=$$?; wait; exit $$built
	$(PY) -m pytest -q $(PYTEST_XDIST) --durations=25

# `make test-flaky N=3`: the suite (or TESTS=, e.g. TESTS=tests/flower/cli) N times; lists every
# test whose outcome varied, and those that failed every time (tests/flaky.py). BURN=2 keeps two
# CPU burners busy beside it. Run it before submitting a change that touches timing, signals, the
# gateway or the scheduler (docs/CONVENTIONS.md).
N ?= 3
BURN ?= 0
TESTS ?=
test-flaky: image ## the suite N times: which tests' outcomes varied
	@$(PY) -m tests.batch_fixtures.swarm_background start --cluster-only
	$(PY) -m tests.flaky --runs $(N) --workers $(TEST_WORKERS) --burn $(BURN) -- $(TESTS)

test-fast: setup  ## no Docker, no slow tests
	$(PY) -m pytest -q $(PYTEST_XDIST) -m "not docker and not slow and not swarm"

test-docker: image
	$(PY) -m pytest -q $(PYTEST_XDIST) -m docker

test-swarm: image  ## only the swarm tests: bring up (or reuse) the 3-node test cluster; make cluster-down after
	$(PY) -m pytest -q $(PYTEST_XDIST) -m swarm

lint: setup
	$(PY) -m ruff check flower flower_batch tests bench examples scripts
	$(PY) -m ruff format --check flower flower_batch tests bench examples scripts
	$(PY) -m mypy --strict flower
	$(PY) -m mypy --strict flower_batch

demo: image       ## the demo matrix: 2 workflow variants x 2 tasks x 2 repeats, offline (scripted model)
	$(FB) matrix examples/jobs.toml -j 2 --fresh --fail-under 0

demo-flow: setup  ## a two-step flower workflow on the host, offline (scripted model)
	$(PY) examples/demo_workflow.py

demo-go: setup    ## the `flower` command (starter flow: clarify -> goal -> work with judge rounds), offline
	$(PY) examples/demo_go.py

bench: image
	$(PY) bench/run_all.py

cluster-up:       ## a 3-node test swarm (Docker-in-Docker) + registry; writes images/.cache/cluster.env
	@scripts/cluster/up.sh

cluster-push: image  ## load the runtime image into the test swarm's manager and push it to its registry
	@scripts/cluster/push.sh

cluster-down:     ## remove the test swarm (nodes, registry, network)
	@scripts/cluster/down.sh

clean:
	rm -rf .pytest_cache .ruff_cache .mypy_cache build dist
