# Two entry points for a fresh machine (Python 3.11, make, apt):
#   make demo  — set up and run the bundled example workflow end to end
#   make test  — set up (system packages included) and run lint, types and the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test setup system lint types pytest bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,dev,providers,protocols,otel,postgres]'
	touch $(STAMP)

setup: $(STAMP)

system:
	bash scripts/setup-system.sh

demo: $(STAMP)
	bash scripts/demo.sh

lint: $(STAMP)
	$(BIN)/ruff format --check agentctl tests benchmarks
	$(BIN)/ruff check agentctl tests benchmarks

types: $(STAMP)
	$(BIN)/mypy --strict agentctl

# pytest-xdist workers: twice the CPUs, at least 4 and at most 12 (each worker starts its own
# PostgreSQL server), because most tests spend their time waiting on the agentctl subprocesses
# they start. PYTEST_WORKERS=0 runs the suite serially.
PYTEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); n=$$((2 * n)); echo $$(( n < 4 ? 4 : n > 12 ? 12 : n )))

pytest: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS)

test: system $(STAMP) lint types pytest

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) .agentctl .pytest_cache .mypy_cache .ruff_cache
