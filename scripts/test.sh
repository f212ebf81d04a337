#!/usr/bin/env bash
# The test suite. Installs the loopback SSH server the remote-device tests need, and the headless Chromium the HTML
# report's browser test uses, when they are missing (Debian packages).
# NP_TEST_FAST=1 (make test-fast): only the tests that need no full np run and no seconds-long lowering, quantizing or
# measuring (pytest -m "not np_run and not heavy"): a quick loop; make test runs everything.
# Arguments go to pytest, e.g. a shuffled run (pytest-random-order; each file still runs on one worker):
#   bash scripts/test.sh --random-order-bucket=module --random-order-seed=1234
set -euo pipefail
if ! command -v sshd >/dev/null 2>&1 && [ ! -x /usr/sbin/sshd ]; then
  echo "installing openssh-server for the SSH tests (Debian package)..."
  if [ "$(id -u)" = 0 ]; then apt-get install -y -qq openssh-server openssh-client >/dev/null || \
      (apt-get update -qq && apt-get install -y -qq openssh-server openssh-client >/dev/null); \
  else sudo apt-get install -y -qq openssh-server openssh-client >/dev/null; fi
fi
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  echo "installing chromium for the HTML report's browser test (Debian package)..."
  if [ "$(id -u)" = 0 ]; then apt-get install -y -qq chromium >/dev/null || \
      (apt-get update -qq && apt-get install -y -qq chromium >/dev/null); \
  else sudo apt-get install -y -qq chromium >/dev/null; fi
fi
select=()
if [ "${NP_TEST_FAST:-0}" = 1 ]; then select=(-m "not np_run and not heavy"); fi
echo "ruff (lint) and mypy --strict (types) over the package, then pytest on both cores (one worker per core,"
echo "each test file on one worker so its module fixtures run once, the longest files first: tests/conftest.py)${select:+; only the tests without a full np run or a seconds-long lowering}"
python -m ruff check src tests bench scripts
python -m mypy src/np_optimizer
exec python -m pytest -q -n "${NP_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "${select[@]}" "$@"
