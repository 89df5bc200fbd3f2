# edgebus developer commands. Two matter on a fresh machine:
#   make run    create .venv, install, start the gateway on its embedded defaults
#   make test   install everything the tests need (Debian packages included), run the suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
EXTRAS_RUN := all
EXTRAS_TEST := all,spark,test
# Debian packages the tests drive as real peers or build against (curl and openssl: the
# commands of README.md and docs/, which tests/docs runs; Java: the local Spark session).
APT_PACKAGES := mosquitto mosquitto-clients cyclonedds-tools cyclonedds-dev nng-utils gcc curl openssl iproute2 openjdk-17-jre-headless
APT_PROGRAMS := mosquitto mosquitto_pub mosquitto_sub mosquitto_passwd idlc nngcat gcc curl openssl ip java
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test bench lint system-deps venv clean

# setup.py and the .pyx: the compiled stream encoder is rebuilt when they change.
$(VENV)/.stamp-run: pyproject.toml setup.py spark_sink/_records.pyx
	[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[$(EXTRAS_RUN)]'
	touch $@

$(VENV)/.stamp-test: pyproject.toml setup.py spark_sink/_records.pyx
	[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[$(EXTRAS_TEST)]'
	touch $@ $(VENV)/.stamp-run

venv: $(VENV)/.stamp-run

# Installs the Debian packages only when one of their programs is missing;
# `apt-get update` runs once, first.
system-deps:
	@missing=""; for p in $(APT_PROGRAMS); do command -v $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages (missing:$$missing)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(APT_PACKAGES) >/dev/null; \
	fi

run: $(VENV)/.stamp-run
	$(VENV)/bin/edgebus run $(if $(CONFIG),-c $(CONFIG),)

test: system-deps $(VENV)/.stamp-test
	$(PY) -m pytest $(PYTEST_ARGS)

bench: system-deps $(VENV)/.stamp-test
	$(PY) -m bench $(BENCH_ARGS)

lint: $(VENV)/.stamp-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
	rm -f spark_sink/_records.c spark_sink/_records.*.so
