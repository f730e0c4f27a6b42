# `make run` starts the demo on a fresh machine; `make test` runs every check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
MANAGE := $(BIN)/python manage.py
TEST_POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/hyperbook

.PHONY: run test test-fast lint format messages bench clean chromium rsyslog golang

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: requirements/base.txt requirements/local.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements/local.txt
	touch $@

run: $(VENV)/.installed
	$(MANAGE) migrate --noinput -v0
	$(MANAGE) collectstatic --noinput -v0
	$(MANAGE) import_mcp_servers config/mcp_servers.json
	$(MANAGE) load_kb_demo
	$(MANAGE) ensure_admin
	$(MANAGE) issue_demo_delegations
	$(MANAGE) ensure_demo_logins
	bin/serve

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(VENV)/.installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The browser tests drive Debian's chromium (with a Korean font for the screenshots); install
# them when missing and we may (CI runs as root).
chromium:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
		apt-get update -qq && apt-get install -y -qq chromium fonts-nanum >/dev/null; } || \
		echo "chromium is not installed: the browser tests will say so"

# The syslog sink's tests run Debian's rsyslogd and its TLS driver (rsyslog-gnutls) on loopback,
# as the test's own child process; installed like chromium.
rsyslog:
	@{ [ -x /usr/sbin/rsyslogd ] && ls /usr/lib/*/rsyslog/lmnsd_gtls.so >/dev/null 2>&1; } || \
		{ [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		apt-get install -y -qq rsyslog rsyslog-gnutls >/dev/null; } || \
		echo "rsyslog is not installed: the syslog sink tests will say so"

# An independent verifier of our checkpoints and proofs is built from Debian's Go and its
# golang.org/x/mod sources (no module download); installed like chromium.
golang:
	@{ command -v go >/dev/null 2>&1 && [ -d /usr/share/gocode/src/golang.org/x/mod/sumdb/tlog ]; } || \
		{ [ "$$(id -u)" = 0 ] && apt-get update -qq && \
		apt-get install -y -qq golang-go golang-golang-x-mod-dev >/dev/null; } || \
		echo "Go is not installed: the Go verifier test will say so"

# SQLite first (the embedded default), then every database test again on PostgreSQL; each file's
# tests on one of two workers, then the tests that time themselves with the machine to themselves.
PARALLEL := -n 2 --dist loadfile
test: lint chromium rsyslog golang
	$(BIN)/pytest $(PARALLEL) -m "not alone"
	DATABASE_URL=$(TEST_POSTGRES_URL) $(BIN)/pytest $(PARALLEL) -m "db and not alone"
	$(BIN)/pytest -m alone
	DATABASE_URL=$(TEST_POSTGRES_URL) $(BIN)/pytest -m "db and alone"

# In-process tests on SQLite only: no server, subprocess, worker, browser or bulk data (`slow`).
test-fast: $(VENV)/.installed
	$(BIN)/pytest -q -m "not slow" $(PARALLEL)

# The English catalogue: collect our messages into locale/en, then compile it. The .mo is committed,
# so `make run` needs no gettext; this target does (xgettext, msgmerge, msgfmt).
messages: $(VENV)/.installed
	$(MANAGE) makemessages -l en --no-wrap
	$(MANAGE) compilemessages -l en --ignore=.venv --ignore=node_modules

bench: $(VENV)/.installed
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) var/broker var/broker-processed var/broker-dead var/broker-control
