# One entry point per task; every target works on a fresh clone.
UV ?= uv
PY := .venv/bin/python

.PHONY: setup test test-fast lint demo bench image clean

setup:            ## install the locked Python deps into .venv
	@command -v $(UV) >/dev/null || python3 -m pip install -q uv
	$(UV) sync --frozen

test: setup       ## the whole suite (Docker tests included when a Docker engine answers)
	$(PY) -m pytest -q

test-fast: setup  ## everything that needs neither Docker nor slow subprocess scenarios
	$(PY) -m pytest -q -m "not docker and not slow"

lint: setup
	$(PY) -m ruff check flower flower_batch tests bench
	$(PY) -m mypy flower flower_batch

demo: setup
	$(PY) examples/demo_workflow.py

bench: setup
	$(PY) bench/run_all.py

clean:
	rm -rf .pytest_cache .ruff_cache .mypy_cache build dist
