# One command per habit. Each target does its own set-up: a fresh clone needs only python3 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.demo-installed

.PHONY: help demo test opensearch lint openapi bench tune answers clean console console-check console-demo

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

# Two installs: what `make demo` needs (the library, the local platform, the model) and, on top of it,
# what the tests, the linters and `make synth` need (the AWS SDK and clients, the dev tools, the CDK).
$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[local]'
	$(BIN)/citewise model install --quiet
	touch $@

$(STAMP): $(DEMO_STAMP)
	$(BIN)/pip install --quiet -e '.[local,aws,dev,cdk]'
	touch $@

demo: $(DEMO_STAMP) ## Ingest the sample corpus and answer three questions with citations
	CITEWISE_HOME=.citewise-demo $(BIN)/citewise demo

# The browser test of Swagger UI (tests/e2e/test_swagger_ui.py) drives Debian's Chromium with Playwright
# (the dev extra). Never `playwright install`: it downloads a browser build of its own. Installed once,
# with apt-get (as root, else through sudo); elsewhere, install Chromium and set CITEWISE_CHROMIUM.
CHROMIUM ?= $(or $(CITEWISE_CHROMIUM),/usr/bin/chromium)
BROWSER_STAMP := $(VENV)/.browser-installed

$(BROWSER_STAMP): $(STAMP)
	@test -x $(CHROMIUM) || { \
		sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	}
	@test -x $(CHROMIUM) || { echo "no Chromium at $(CHROMIUM): install it, or set CITEWISE_CHROMIUM" >&2; exit 1; }
	touch $@

# The web console (docs/console.md): its npm project in console/, pinned in console/package-lock.json and
# installed there with npm ci. Its built files are committed in local/citewise_local/console/, so a fresh
# clone, `make demo` and a wheel build need no Node; `make console` rebuilds them after a change to
# console/, and `make console-check` proves the committed files are what a fresh build of the sources gives.
# The browser test (tests/e2e/test_console.py) takes axe-core from console/node_modules.
CONSOLE_STAMP := console/node_modules/.installed

$(CONSOLE_STAMP): console/package.json console/package-lock.json
	npm ci --prefix console --no-audit --no-fund --loglevel=error
	touch $@

console: $(CONSOLE_STAMP) ## Build the web console into local/citewise_local/console/ (type-check, unit tests, bundle)
	npm --prefix console run --silent test
	npm --prefix console run --silent build

console-check: console ## Fail when the committed console build differs from a fresh build of console/
	git diff --exit-code --stat -- local/citewise_local/console
	@test -z "$$(git status --porcelain -- local/citewise_local/console)" || { git status --short -- local/citewise_local/console; exit 1; }

console-demo: $(DEMO_STAMP) ## The web console on the sample corpus: serve, upload the samples, print a sign-in link
	BIN=$(BIN) scripts/console-demo.sh

# The MCP Inspector, the protocol's reference client, checks every tool result in tests/e2e/test_mcp.py
# (its CLI mode, against `citewise mcp` and /mcp). Pinned in tests/e2e/inspector/package-lock.json and
# installed there with npm ci, never globally. 2.12.0 declares Node >= 22.19 (as undici 8 does) but its CLI
# runs on Node 20; the versions whose engines admit Node 20 (0.15.0 and older) cannot send a bearer token.
INSPECTOR_STAMP := tests/e2e/inspector/node_modules/.installed

$(INSPECTOR_STAMP): tests/e2e/inspector/package.json tests/e2e/inspector/package-lock.json
	npm ci --prefix tests/e2e/inspector --no-audit --no-fund --loglevel=error
	touch $@

# The tests marked `opensearch` run on a real OpenSearch 2.19 node with the k-NN plugin: the script fetches
# it from Maven Central and builds k-NN's faiss library once into a cache (/var/cache/citewise-opensearch
# as root, else ~/.cache/citewise-opensearch), starts one node on a loopback port for the whole run,
# hands its URL to pytest in CITEWISE_OPENSEARCH_URL and stops it when pytest ends, whatever the outcome.
OPENSEARCH := scripts/opensearch/opensearch.sh

opensearch: ## Fetch OpenSearch 2.19 + k-NN and build k-NN's faiss library into the cache (once; make test does it too)
	$(OPENSEARCH) fetch

# Two pytest processes (pytest-xdist), sharing the node; session fixtures (the synthesized templates,
# `citewise serve`) are built once per process. Not `--dist loadfile`: it schedules by test id, and
# schemathesis gives its ten operations of tests/e2e/test_openapi_fuzz.py one id, so nine never ran.
test: $(STAMP) $(BROWSER_STAMP) $(INSPECTOR_STAMP) $(CONSOLE_STAMP) ## Run the whole test suite, on a real OpenSearch node it starts and stops
	$(OPENSEARCH) run -- $(BIN)/pytest -n 2

lint: $(STAMP) ## ruff, mypy (strict on the library, the local package and the handlers), import contracts
	$(BIN)/ruff check layers local functions cdk tests samples benchmarks
	$(BIN)/ruff format --check layers local functions cdk tests samples benchmarks
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/mypy --strict cdk
	# Every function's module is called `handler`: one mypy run each, so the names do not collide.
	for handler in functions/*/handler.py; do $(BIN)/mypy --strict $$handler || exit 1; done

openapi: $(STAMP) ## Regenerate docs/openapi.json from the API models (a test fails when it is stale)
	$(BIN)/python -m citewise.api.openapi > docs/openapi.json

$(VENV)/.bench-installed: $(STAMP)
	$(BIN)/pip install --quiet -e '.[local,aws,dev,cdk,bench]'
	touch $@

bench: $(VENV)/.bench-installed ## Benchmarks (ingest, query latency, cold imports, layer size): table + benchmarks/results/latest.json
	$(BIN)/python -m benchmarks.run

tune: $(VENV)/.bench-installed ## Fusion / depth / calibration sweeps on scifact-train, tuned on 60%, confirmed on 40% (docs/evaluation.md)
	OPENBLAS_NUM_THREADS=1 $(BIN)/python -m benchmarks.fusion_tuning --dataset ../shared/datasets/scifact-train

# The answers benchmark needs only what the demo needs: the bundled SQuAD sample, the local extra, the model.
# More options through ANSWERS_ARGS, e.g. make answers ANSWERS_ARGS="--split tune --per-query /tmp/tune.jsonl".
ANSWERS_ARGS ?=

answers: $(DEMO_STAMP) ## Answer quality on the bundled SQuAD 2.0 sample: tune, check, all (docs/evaluation.md)
	$(BIN)/citewise eval --answers $(ANSWERS_ARGS)

clean: ## Remove the virtual environment and local demo data
	rm -rf $(VENV) .citewise-demo .citewise-console .pytest_cache .mypy_cache .ruff_cache

# --- AWS (CDK) -------------------------------------------------------------------------------------
# The CDK CLI is pinned in cdk/package-lock.json (aws-cdk 2.1148.1 reads aws-cdk-lib 2.275's cloud
# assembly). No telemetry, no notices, no version check, no Node end-of-life banner.
CDK_STAMP := cdk/node_modules/.installed
CDK := CDK_DISABLE_CLI_TELEMETRY=true CDK_DISABLE_VERSION_CHECK=true JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 \
	cdk/node_modules/.bin/cdk --no-notices
ENVS := dev prod
ENV ?= dev
# Where the alarms go: `make deploy ENV=prod ALARM_EMAIL=ops@example.com` (prod refuses to deploy without one).
ALARM_EMAIL ?=
# Commands that build the app without deploying it (synth, bootstrap, destroy) need some address for
# prod's template to build at all; only `deploy` insists on a real one.
SYNTH_ALARM_EMAIL ?= $(or $(ALARM_EMAIL),alarms@example.invalid)
# Another search mode than cdk.json's for every target below: `make synth SEARCH_MODE=s3vectors`
# (managed, serverless or s3vectors; docs/deploy.md).
SEARCH_MODE ?=
MODE_CONTEXT := $(if $(SEARCH_MODE),-c search_mode=$(SEARCH_MODE))

.PHONY: synth deploy destroy

$(CDK_STAMP): cdk/package.json cdk/package-lock.json
	npm ci --prefix cdk --no-audit --no-fund --loglevel=error
	touch $@

synth: $(STAMP) $(CDK_STAMP) ## Synthesize every environment offline (layer bundled, cdk-nag, cfn-lint) into cdk.out/
	@for env in $(ENVS); do \
		echo "synth $$env"; \
		AWS_EC2_METADATA_DISABLED=true $(CDK) synth --quiet -c env=$$env -c alarm_email=$(SYNTH_ALARM_EMAIL) $(MODE_CONTEXT) \
			--output cdk.out/$$env || exit 1; \
	done
	$(BIN)/cfn-lint --ignore-checks W3005 -- $(foreach env,$(ENVS),cdk.out/$(env)/citewise-$(env).template.json)

deploy: $(STAMP) $(CDK_STAMP) ## Deploy one environment to AWS: make deploy ENV=dev (bootstraps the account once)
	$(CDK) bootstrap -c env=$(ENV) -c alarm_email=$(SYNTH_ALARM_EMAIL) $(MODE_CONTEXT) --output cdk.out/$(ENV)
	$(CDK) deploy -c env=$(ENV) $(if $(ALARM_EMAIL),-c alarm_email=$(ALARM_EMAIL)) $(MODE_CONTEXT) --output cdk.out/$(ENV) --outputs-file cdk.out/$(ENV)-outputs.json citewise-$(ENV)

destroy: $(STAMP) $(CDK_STAMP) ## Delete one environment's stack: make destroy ENV=dev (asks first)
	$(CDK) destroy -c env=$(ENV) -c alarm_email=$(SYNTH_ALARM_EMAIL) $(MODE_CONTEXT) --output cdk.out/$(ENV) citewise-$(ENV)
