# make demo: run np on the built-in samples.  make test: run the test suite.  make test-fast: the tests that need no
# full np run and no seconds-long lowering (pytest -m 'not np_run and not heavy'), after the same lint and type checks.
# Both create .venv from the pinned dependencies when it is missing (or when the pins change).

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.np-installed
DEMO_DIR ?= demo-workspace

.PHONY: demo test test-fast bench clean-demo docs venv

venv: $(STAMP)

$(STAMP): pyproject.toml requirements.lock scripts/install_pins.sh scripts/check_env.py scripts/old_runtime.py scripts/compile_bytecode.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "Installing np and its pinned dependencies into $(VENV) (first time: about 2 minutes)..."
	@# the pins first, two pip processes side by side (see the script); then pip resolves np against them
	bash scripts/install_pins.sh $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile -c requirements.lock -e '.[test]' 2>&1 \
	  | sed '/is ignored: it is neither a file nor a directory/d'
	@# MLIA's float .pt2 converter without its torch==2.14.0 pin (a CUDA-only build): see pyproject.toml
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile --no-deps -c requirements.lock mlia-converters-pytorch 2>&1 \
	  | sed '/is ignored: it is neither a file nor a directory/d'
	@# pip compiles one file at a time; this uses every core (see the script)
	$(PY) scripts/compile_bytecode.py
	$(PY) scripts/check_env.py
	@# a runtime without the event tracer, for the test of a device that cannot trace (13 MB)
	$(PY) scripts/old_runtime.py $(VENV)/old-executorch
	@touch $(STAMP)

demo: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" DEMO_DIR="$(DEMO_DIR)" bash scripts/demo.sh

test: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash scripts/test.sh

test-fast: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" NP_TEST_FAST=1 bash scripts/test.sh

bench: $(STAMP)
	$(PY) bench/pipeline.py
	$(PY) bench/profile.py
	$(PY) bench/measure.py
	$(PY) bench/report_html.py

docs: $(STAMP)
	$(PY) -m np_optimizer.docgen.compatibility > docs/compatibility.md
	$(PY) -m np_optimizer.docgen.errors > docs/errors.md

clean-demo:
	rm -rf $(DEMO_DIR)
