# Issuance Console: `make run` (try it) and `make test` (everything CI checks).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PG_URL ?= postgresql://postgres@127.0.0.1:5432/test
# Debian packages the real-server tests use (Pebble for ACME, BIND9 for DNS-01, Chromium for the
# UI, a private PostgreSQL server and redis-server for the outage tests).
SYSTEM_PACKAGES := pebble bind9 bind9-utils chromium postgresql redis-server pdns-server \
  pdns-backend-sqlite3
SYSTEM_BINARIES := /usr/bin/pebble /usr/sbin/named /usr/bin/nsupdate /usr/bin/chromium \
  /usr/bin/redis-server /usr/sbin/pdns_server /usr/lib/x86_64-linux-gnu/pdns/libgsqlite3backend.so

.PHONY: run test lint typecheck pytest-sqlite pytest-postgres system-deps node-deps venv clean \
  kube-apiserver

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

.dev-env:
	@umask 077; { \
	  echo "SECRET_KEY=$$($(PY) -c 'import secrets; print(secrets.token_urlsafe(50))')"; \
	  echo "KEY_ENCRYPTION_KEY=$$($(PY) -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"; \
	} > .dev-env
	@echo "Generated development keys in .dev-env (keep it: it decrypts the stored private keys)."

run: $(STAMP) .dev-env
	set -a; source .dev-env; set +a; \
	$(PY) manage.py migrate --noinput && \
	$(PY) manage.py bootstrap_demo && \
	$(PY) manage.py serve --host 127.0.0.1 --port 8000

system-deps:
	@missing=0; for b in $(SYSTEM_BINARIES); do test -e $$b || missing=1; done; \
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing=1; \
	if [ $$missing = 1 ]; then \
	  echo "Installing $(SYSTEM_PACKAGES) from Debian"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES) >/dev/null; \
	fi

# axe-core for the browser tests' accessibility checks (tests/browser/a11y.py), from the npm
# registry the machine is configured with: `npm ci` installs the exact version and integrity
# hash in package-lock.json into node_modules/ (.npmrc keeps registry URLs out of the lockfile).
# Only when missing or when the pins change; Debian's nodejs/npm first if npm is absent.
AXE := node_modules/axe-core/axe.min.js

$(AXE): package.json package-lock.json
	@command -v npm >/dev/null || { echo "Installing nodejs and npm from Debian"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }
	npm ci --no-audit --no-fund
	touch $(AXE)

node-deps: $(AXE)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	KEY_ENCRYPTION_KEY=typecheck DEBUG=1 $(VENV)/bin/mypy console issuance tests bench

# The suite runs in PYTEST_WORKERS pytest-xdist processes: 3 on the CI machine's 2 cores,
# because the real-server tests mostly wait (outages with default timings) rather than
# compute. tests/conftest.py keeps each module, and the tests that share kube-apiservers, in
# one process; --no-loadscope-reorder hands the modules out in collection order, so each
# process runs its tests in the same relative order as a single-process run.
# PYTEST_WORKERS=0: one process.
PYTEST_WORKERS ?= 3
PYTEST_XDIST := -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder

pytest-sqlite: $(STAMP)
	DATABASE_URL=sqlite:///$(CURDIR)/var/test.sqlite3 $(VENV)/bin/pytest -q $(PYTEST_XDIST) \
	  -m "not postgres and not e2e and not browser and not kube"

pytest-postgres: $(STAMP) system-deps node-deps
	DATABASE_URL=$(PG_URL) $(VENV)/bin/pytest -q $(PYTEST_XDIST) --durations=15

# kube-apiserver v1.20.2 (+ Debian's etcd-server) for the Kubernetes connector tests; built once
# per machine from Debian's source package and cached in /var/cache/issuance-console/kube.
kube-apiserver:
	scripts/build-kube-apiserver.sh

test: $(STAMP) system-deps node-deps kube-apiserver lint typecheck pytest-sqlite pytest-postgres

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache node_modules
