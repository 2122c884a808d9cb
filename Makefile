# Two commands for a new user: `make demo` and `make test`. Both install what they need first.
# `make help` lists every target and the variables that pass arguments on (DEMO_ARGS, BENCH, ...).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
VENV_COMPAT := .venv-compat
PY := $(VENV)/bin/python
PY_COMPAT := $(VENV_COMPAT)/bin/python
PYTEST_ARGS ?=
# pytest-xdist workers of each pytest session, each with its own local servers and SparkSession (docs/testing.md).
TEST_WORKERS ?= 3
COMPAT_WORKERS ?= 2
DEMO_ARGS ?=
BENCH ?=
SERVERS_ARGS ?=
# Tests that run the connector and jobs; the compat target runs them on EMR's pyspark 4.0.2.
COMPAT_TESTS := tests/connector tests/spark_app

.PHONY: help setup demo demo-short servers test lint compile test-main test-compat bench bench-no-soak clean synth emr-lock \
	requirements dist

setup: $(VENV)/.installed $(VENV)/.pyspark-zip-hook node_modules/.installed

help:
	@echo 'make demo            the whole pipeline on local Kinesis and local Spark, ends with VERDICT: PASS (docs/jobs.md)'
	@echo '     DEMO_ARGS=...   flags of python -m spark_app.demo, e.g. make demo DEMO_ARGS=--no-quotas'
	@echo 'make demo-short      the demo in CI mode: 12 s of events (make demo-short DEMO_ARGS=... too)'
	@echo 'make test            lint, then the whole suite on pyspark 4.3 beside the connector and job tests on 4.0.2'
	@echo '     TEST_JOBS=1     the two pytest sessions one after the other (default 2: side by side)'
	@echo '     TEST_WORKERS=N  pytest-xdist workers of the pyspark 4.3 session (default 3; 0: none)'
	@echo '     COMPAT_WORKERS=N  the same for the pyspark 4.0.2 session (default 2)'
	@echo '     PYTEST_ARGS=... passed to both pytest sessions, e.g. make test PYTEST_ARGS="-x -k quota"'
	@echo 'make servers         local Kinesis (behind the quotas) and moto until Ctrl-C; prints what to export'
	@echo '     SERVERS_ARGS=.. flags of python -m localaws, e.g. SERVERS_ARGS="--kinesis kinesis-mock --no-quotas"'
	@echo 'make bench           every benchmark in bench/, output in bench/results/; includes the hour-long soaks'
	@echo '     BENCH=...       arguments of python -m bench.run_all: names (BENCH="decode latency") and/or --no-quotas'
	@echo 'make bench-no-soak   every benchmark but the soaks (BENCH=--no-quotas works here too)'
	@echo 'make lint            ruff check and ruff format --check'
	@echo 'make compile         compile the project modules once (make test does it first; docs/testing.md)'
	@echo 'make setup           .venv (the project editable, Spark workers on its python and its pyspark) and node_modules'
	@echo 'make synth           the CDK app, offline (docs/infra.md); make dist: sdist and wheel into dist/'
	@echo 'make requirements    re-lock requirements*.txt; make emr-lock: infra/emr-lock.txt (needs PyPI)'
	@echo 'make clean           remove the venvs and node_modules'

# Then the project itself, editable, so that `.venv/bin/python script.py` from any directory finds the connector and
# pyspark finds format("aws-kinesis") by itself. Compat mode puts the checkout on sys.path (a .pth line): pyspark's
# data source lookup lists modules with pkgutil.iter_modules, which does not see the default mode's import hook.
# Offline: setuptools is pinned in requirements.txt. tests/package/test_editable.py runs this very line.
# Last, a start-up hook (a .pth line run by every start of this venv's python): Spark starts its Python workers with
# PYSPARK_PYTHON, `python3` from PATH when unset, which lacks the connector (load() fails with DATA_SOURCE_NOT_FOUND);
# the hook sets it to this venv's python when unset, so `.venv/bin/python my_job.py` works. Not in the wheel
# (docs/source.md, "Running a script from this checkout"); tests/package/test_spark_python_hook.py runs this line.
SPARK_PYTHON_HOOK := import os, sys; sys.executable and os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# The locked files go in with uv (pinned, in a folder of its own): it links them from its cache on a fraction of pip's
# CPU and checks their hashes as pip would. From its cache first: online, it finds PyPI's answers stale here and
# builds pyspark's sdist again each time, 25 s (docs/testing.md, "Setup"). Installed modules are compiled once: with
# PYTHONDONTWRITEBYTECODE set, as on this project's CI, Python would compile every import again in every process
# (docs/testing.md, "A second look"). compileall uses every core and skips the packages' own test folders and
# aws_cdk: 183 MB of source, of which the CDK app and its tests import a quarter, compiled by importing them.
# The 4.0.2 venv's compile runs niced: the 4.3 session, which starts first, waits for the 4.3 venv's.
UV_PIN := uv==0.13.9
UV := .venv-uv/bin/uv
$(UV):
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --target .venv-uv $(UV_PIN)
UV_PIP = $(UV) pip install --quiet --require-hashes --python $(1) -r $(2)
UV_INSTALL = $(call UV_PIP,$(1),$(2)) --offline 2>/dev/null || $(call UV_PIP,$(1),$(2))
COMPILE_INSTALLED = $(1) -m compileall -q -j0 -x 'site-packages/(.*/tests?/|aws_cdk/)' \
	"$$($(1) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
$(PY) $(PY_COMPAT):
	$(PYTHON) -m venv $(@D:/bin=)
$(VENV)/.installed: requirements.txt pyproject.toml | $(UV) $(PY)
	$(call UV_INSTALL,$(PY),requirements.txt)
	$(call COMPILE_INSTALLED,$(PY))
	env -u PYTHONDONTWRITEBYTECODE $(PY) -c 'import app, aws_cdk.assertions, aws_cdk.aws_sqs, aws_cdk.cx_api'
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation --config-settings editable_mode=compat -e .
	$(PY) -c 'import sys, sysconfig; open(sysconfig.get_path("purelib") + "/pyspark_python_hook.pth", "w").write(sys.argv[1] + "\n")' '$(SPARK_PYTHON_HOOK)'
	@touch $@

$(VENV_COMPAT)/.installed: requirements-compat.txt | $(UV) $(PY_COMPAT)
	$(call UV_INSTALL,$(PY_COMPAT),requirements-compat.txt)
	nice -n 10 $(call COMPILE_INSTALLED,$(PY_COMPAT))
	@touch $@

# Spark puts the pyspark.zip inside the installed pyspark first on its Python processes' path, and Python compiles a
# zip's modules again in every process that imports them: 1.1 CPU s to start a query's source runner instead of 0.3.
# The zip holds the installed pyspark's own files, so a start-up hook per venv drops it from the path
# (docs/testing.md, "The pyspark.zip"); tests/package/test_pyspark_zip_hook.py runs this line.
PYSPARK_ZIP_HOOK := import os, sys; sys.path[:] = [p for p in sys.path if os.path.realpath(p) != os.path.realpath(ZIP)]
%/.pyspark-zip-hook: %/.installed
	$*/bin/python -c 'import sys, sysconfig; lib = sysconfig.get_path("purelib"); open(lib + "/pyspark_zip_hook.pth", "w").write(sys.argv[1].replace("ZIP", repr(lib + "/pyspark/python/lib/pyspark.zip")) + "\n")' '$(PYSPARK_ZIP_HOOK)'
	@touch $@

# A class-data-sharing archive of Spark's classes per venv: the tests' Spark JVMs start on about half the CPU
# (tests/spark_classes.py, docs/testing.md). Made once, after the venv's installs; about 30 s each. Never niced: its
# app's Python worker must connect back to Spark within 10 s, which a niced one beside the 4.3 session missed.
%/spark-classes.jsa: %/.installed
	$*/bin/python -m tests.spark_classes $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

demo: setup
	$(PY) -m spark_app.demo $(DEMO_ARGS)

# The demo's CI mode: fewer events, shorter windows; same verdict (how long it takes: docs/jobs.md).
demo-short: setup
	$(PY) -m spark_app.demo --short $(DEMO_ARGS)

# Local servers for your own experiments, until Ctrl-C (docs/localaws.md).
servers: setup
	$(PY) -m localaws $(SERVERS_ARGS)

# The project's own modules compiled once, for the ~1,000 processes a test run starts (query runners, Spark's Python
# workers, apps): with PYTHONDONTWRITEBYTECODE set, as on this project's CI, each compiled what it imported again.
# Both venvs run the same Python, so one cache serves both (docs/testing.md, "Compiled once").
PROJECT_PY := app.py bench connector generator infra localaws spark_app tests
compile: $(VENV)/.installed
	$(PY) -m compileall -q -j0 $(PROJECT_PY)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# tests/package installs the wheel against both venvs' pyspark (newest and 4.0.2).
test-main: setup $(VENV_COMPAT)/.installed $(VENV)/spark-classes.jsa lint compile
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# The 4.3 session is the longer: the 4.0.2 one waits for its class archive (order-only) rather than slow it down.
test-compat: $(VENV_COMPAT)/.installed $(VENV_COMPAT)/.pyspark-zip-hook node_modules/.installed \
	$(VENV_COMPAT)/spark-classes.jsa lint compile | $(VENV)/spark-classes.jsa
	$(PY_COMPAT) -m pytest -n $(COMPAT_WORKERS) --dist loadgroup $(COMPAT_TESTS) $(PYTEST_ARGS)

# The README's test command: the installs side by side (two venvs, npm), lint, then the whole suite on the newest
# pyspark and the connector + jobs on 4.0.2 side by side (TEST_JOBS=2), each pytest session spread over
# TEST_WORKERS / COMPAT_WORKERS xdist workers, each worker with its own local servers on free ports and its own
# SparkSession. One make run: the 4.3 session starts once .venv, its class archive and the lint are done, not when
# everything is (docs/testing.md, "Setup"). The suite keeps CI's two cores busy that way; the figures, and what
# each knob costs: docs/testing.md. `make test TEST_JOBS=1 TEST_WORKERS=0 COMPAT_WORKERS=0` runs one test at a time,
# as before (a machine loaded with other work: Spark's fixed 10 s wait for a new Python worker to connect back can
# run out). --output-sync prints each target's output whole once it ends.
TEST_JOBS ?= 2
ifeq ($(TEST_JOBS),1)
test-compat: | test-main
endif
test:
	@$(MAKE) --no-print-directory -j3 --output-sync=target test-main test-compat

# What a release publishes: the sdist and the wheel built from it (`python -m build`, offline), into dist/.
dist: setup
	$(PY) -c "from pathlib import Path; from infra.packaging import build_release; print(*build_release(Path('dist')))"

# Every benchmark, one after another, each one's output into bench/results/ (docs/benchmarks.md). bench.soak and
# bench.driver_soak run for about an hour each, bench.sink_replay (two short soaks) for half of one: bench-no-soak
# leaves them out (alone: `make bench BENCH=soak`).
bench: setup
	$(PY) -m bench.run_all $(BENCH)

bench-no-soak: setup
	$(PY) -m bench.run_all $$($(PY) -c 'from bench.run_all import benchmark_names as b; print(*(n for n in b() if n not in ("soak", "driver_soak", "sink_replay")))') $(BENCH)

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
	rm -rf $(VENV) $(VENV_COMPAT) .venv-tools .venv-uv node_modules .pytest_cache
