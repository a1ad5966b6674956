# Racecap — the two commands are `make run` and `make test`; everything else is a helper.
# Every target installs what it needs first (idempotent, cached in ignored folders).
SHELL := /bin/bash
.DEFAULT_GOAL := help
PY := .venv/bin/python
PYTEST := .venv/bin/pytest
ENV := source local/env.sh &&
export CDK_DISABLE_CLI_TELEMETRY := true
export ARTILLERY_DISABLE_TELEMETRY := true
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD := 1
# Bytecode in one ignored folder rather than beside the sources: the tree stays clean (nothing
# for the CDK assets to pick up), and the stack's processes and the tests' fresh interpreters
# load compiled modules instead of compiling them each time (local/env.sh sets the same).
export PYTHONPYCACHEPREFIX := $(CURDIR)/.cache/pycache
# Branch coverage of the capabilities' logic (their services and pure rules: the registration
# core, the directors' set-up, window, stats and lists, the modules that were racecap.logic before
# issue 36), measured on the unit suite alone, on the fakes of tests/fakes: it must stay >= 90%.
LOGIC := audit.service emails.models emails.sender emails.templates holds.service ledger.cancellations ledger.policy \
         ledger.events ledger.service participants.service payments.calls places.rules races.catalog races.rules \
         registration.messages registration.payment registration.service registration.status \
         registration.sweeper registration.writer retention.service setup.models setup.rules setup.service \
         stats.service window.prewarm window.service
LOGIC_COVERAGE := $(foreach m,$(LOGIC),--cov=racecap.$(m)) --cov-branch --cov-fail-under=90 --cov-report=term:skip-covered

.PHONY: help install run test lint typecheck openapi openapi-check unit infra-tests integration browser \
        site layers synth deploy burst bench fuzz token director totp smoke preflight clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

install: ## install everything missing (apt, Maven, Node 22 + npm tools, the venv)
	@bash local/install.sh

run: install site ## start the whole local stack, seed a demo race, print the URL (Ctrl-C stops it)
	@$(ENV) $(PY) -m local.stack run

test: install site ## lint, types, OpenAPI drift, unit, infrastructure, integration and browser tests
	@echo "[test] lint";          $(MAKE) --no-print-directory lint
	@echo "[test] types";         $(MAKE) --no-print-directory typecheck
	@echo "[test] openapi drift"; $(MAKE) --no-print-directory openapi-check
	@echo "[test] unit suite (no sockets; logic branch coverage >= 90%)"; $(ENV) $(PYTEST) -q -p no:cacheprovider tests/unit $(LOGIC_COVERAGE)
	@echo "[test] contract, infrastructure, integration and browser suites on two workers, a stack each, each stack given half the local concurrency (the 15 slowest are listed: the whole target stays near 20 minutes)"; $(ENV) RACECAP_LOCAL_CONCURRENCY=8 $(PYTEST) -q -p no:cacheprovider -n 2 --durations=15 tests --ignore=tests/unit

lint: ## ruff
	@.venv/bin/ruff check .
	@.venv/bin/ruff format --check .

typecheck: ## mypy
	@.venv/bin/mypy blueprint layers/racecap/python/racecap functions local tools cdk

openapi: ## regenerate the committed OpenAPI document
	@$(PY) -m tools.openapi

openapi-check: ## fail if the committed OpenAPI document is stale
	@$(PY) -m tools.openapi --check

unit: install ## unit tests only (no sockets), with the logic layer's branch coverage
	@$(PYTEST) -q tests/unit $(LOGIC_COVERAGE)

infra-tests: install ## CDK assertions + the parity test
	@$(PYTEST) -q tests/infra

integration: install site ## integration tests against the real local servers
	@$(ENV) $(PYTEST) -q tests/integration

site: ## build the static site with fingerprinted assets into .build/site
	@$(PY) site/build.py --out .build/site >/dev/null

layers: install ## build the Lambda deps layer for arm64 into .build/layers/deps
	@rm -rf .build/layers/deps && mkdir -p .build/layers/deps/python
	@.venv/bin/pip install -q --no-compile -r requirements.txt --target .build/layers/deps/python \
	  --platform manylinux2014_aarch64 --implementation cp --python-version 3.12 --only-binary=:all:

synth: install ## synthesize the CDK app (offline; cdk-nag runs)
	@$(ENV) CDK_DEFAULT_ACCOUNT=$${CDK_DEFAULT_ACCOUNT:-123456789012} CDK_DEFAULT_REGION=$${CDK_DEFAULT_REGION:-us-east-1} \
	  cdk synth --quiet && echo "synthesized to cdk.out/"

deploy: install layers site ## deploy to the AWS account in your environment
	@$(ENV) cdk deploy --all --require-approval broadening

burst: install site ## Artillery burst against the local stack (or TARGET=https://…)
	@$(ENV) $(PY) -m tools.burst

fuzz: install site ## schemathesis, all checks + stateful, for RACECAP_FUZZ_SECONDS (default 900) against a fresh local stack
	@$(ENV) RACECAP_FUZZ_SECONDS=$${RACECAP_FUZZ_SECONDS:-900} $(PYTEST) -q -p no:cacheprovider tests/integration/test_contract.py

bench: install site ## the benchmark: writes reports/bench.json
	@$(ENV) $(PY) -m tools.bench

smoke: install ## smoke-test a stage end to end: TARGET=https://… SECRET=<SmokeDirectorSecretArn> (no SECRET: make run's stack)
	@test -n "$(TARGET)" || { echo "usage: make smoke TARGET=https://… SECRET=<stack output SmokeDirectorSecretArn>"; exit 2; }
	@$(ENV) $(PY) -m tools.smoke --target "$(TARGET)" $(if $(SECRET),--secret "$(SECRET)",)

preflight: install ## before an opening: will the account and stage take it? TARGET=<stack name> RUNNERS_PER_MINUTE=5000
	@test -n "$(TARGET)" || { echo "usage: make preflight TARGET=<CloudFormation stack name> RUNNERS_PER_MINUTE=<expected burst>"; exit 2; }
	@$(ENV) $(PY) -m tools.preflight --stack "$(TARGET)" --runners-per-minute $${RUNNERS_PER_MINUTE:-5000}

token: ## print a race director's bearer token for the running local stack (DIRECTOR=name: another director)
	@bash local/install.sh >&2  # progress to stderr: stdout is the token alone, for TOKEN=$$(make -s token)
	@$(ENV) $(PY) -m local.auth token $(if $(DIRECTOR),--director $(DIRECTOR),)

director: ## invite a race director to the running local stack: EMAIL=ana@example.org (prints the temporary password)
	@test -n "$(EMAIL)" || { echo "usage: make director EMAIL=ana@example.org"; exit 2; }
	@$(ENV) $(PY) -m local.directors invite --email "$(EMAIL)"

totp: ## print the demo director's current TOTP code for the running local stack's console
	@$(ENV) $(PY) -m local.directors code

clean: ## remove build output and local state (keeps the install cache)
	@rm -rf .build cdk.out .local-stack reports test-artifacts
