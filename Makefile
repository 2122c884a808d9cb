# Two commands for a new user: `make demo` and `make test`. Both install what they need first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
VENV_COMPAT := .venv-compat
PY := $(VENV)/bin/python
PY_COMPAT := $(VENV_COMPAT)/bin/python
PYTEST_ARGS ?=
# Tests that run the connector and jobs; the compat target runs them on EMR's pyspark 4.0.2.
COMPAT_TESTS := tests/connector tests/spark_app

.PHONY: setup demo demo-short test lint test-main test-compat bench clean synth emr-lock requirements dist

setup: $(VENV)/.installed node_modules/.installed

# Then the project itself, editable, so that `.venv/bin/python script.py` from any directory finds the connector and
# pyspark finds format("aws-kinesis") by itself. Compat mode puts the checkout on sys.path (a .pth line): pyspark's
# data source lookup lists modules with pkgutil.iter_modules, which does not see the default mode's import hook.
# Offline: setuptools is pinned in requirements.txt. tests/package/test_editable.py runs this very line.
$(VENV)/.installed: requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation --config-settings editable_mode=compat -e .
	@touch $@

$(VENV_COMPAT)/.installed: requirements-compat.txt
	@test -x $(PY_COMPAT) || $(PYTHON) -m venv $(VENV_COMPAT)
	$(PY_COMPAT) -m pip install --quiet --disable-pip-version-check -r requirements-compat.txt
	@touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

demo: setup
	$(PY) -m spark_app.demo $(DEMO_ARGS)

# The demo's CI mode (~40 s): fewer events, shorter windows; same verdict.
demo-short: setup
	$(PY) -m spark_app.demo --short $(DEMO_ARGS)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# tests/package installs the wheel against both venvs' pyspark (newest and 4.0.2).
test-main: setup $(VENV_COMPAT)/.installed
	$(PY) -m pytest $(PYTEST_ARGS)

test-compat: $(VENV_COMPAT)/.installed node_modules/.installed
	$(PY_COMPAT) -m pytest $(COMPAT_TESTS) $(PYTEST_ARGS)

# The README's test command: the installs side by side (two venvs, npm), lint, then the whole suite on the newest
# pyspark and the connector + jobs on 4.0.2 side by side (TEST_JOBS=2): two pytest sessions, each with its own
# local servers on free ports and its own SparkSession. Alone, each keeps 0.9-1.5 of CI's two cores busy (it
# mostly waits on Spark triggers, server round trips and JVM start-ups), so side by side they end minutes
# earlier (tests/spark_app on both: 168 s + 120 s one after the other, 187 s side by side; with
# tests/connector/test_source_spark.py added: 236 s + 201 s, 335 s side by side; all green).
# Every test still runs once on the newest pyspark and the connector + jobs once on 4.0.2.
# `make test TEST_JOBS=1` runs them one after the other, as before: on a machine already loaded with other
# work, Spark's fixed 10 s wait for a new Python worker to connect back can run out. --output-sync prints
# each target's output whole once it ends (test-main's last).
TEST_JOBS ?= 2
test:
	@$(MAKE) --no-print-directory -j3 --output-sync=target setup $(VENV_COMPAT)/.installed
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target test-main test-compat

# What a release publishes: the sdist and the wheel built from it (`python -m build`, offline), into dist/.
dist: setup
	$(PY) -c "from pathlib import Path; from infra.packaging import build_release; print(*build_release(Path('dist')))"

bench: setup
	$(PY) -m bench.run_all $(BENCH)

# The CDK app (docs/infra.md): offline, with the pinned CLI, telemetry and notices off.
synth: setup
	CDK_DISABLE_CLI_TELEMETRY=true JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 npx cdk synth --no-notices --quiet

# requirements*.txt pin every package with the hashes of its files (pip-compile --generate-hashes), so that
# `pip install -r` (setup, above) refuses a file that is not the one locked. After editing requirements*.in, this
# writes them again; pip-compile keeps the versions already pinned unless a .in line asks for another. pip-tools
# runs from a venv of its own. Then run `make emr-lock` if a connector dependency changed.
PIP_TOOLS := pip-tools==7.6.2
PIP_COMPILE := CUSTOM_COMPILE_COMMAND="make requirements" .venv-tools/bin/pip-compile --quiet --generate-hashes \
	--allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links --annotation-style=line
requirements:
	@test -x .venv-tools/bin/pip-compile || ($(PYTHON) -m venv .venv-tools && .venv-tools/bin/pip install --quiet $(PIP_TOOLS))
	$(PIP_COMPILE) -o requirements.txt requirements.in
	$(PIP_COMPILE) -o requirements-compat.txt requirements-compat.in

# What EMR installs (infra/emr-lock.txt): the connector's dependencies at requirements.txt's versions, one wheel
# each for the nodes (CPython 3.11, aarch64), with hashes. Needs PyPI; run it after changing requirements.txt.
emr-lock: $(VENV)/.installed
	$(PY) -m infra.wheelhouse lock

clean:
	rm -rf $(VENV) $(VENV_COMPAT) .venv-tools node_modules .pytest_cache
