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
# One torch (OpenMP) thread per test process: the two pytest workers already fill both cores, and more threads only
# spin against each other (one AWQ/GPTQ test took 60 CPU-s with the default threads, 10 CPU-s with one, on 2 loaded
# cores). A test that measures threads sets them itself; `OMP_NUM_THREADS=2 bash scripts/test.sh` overrides this.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
select=()
if [ "${NP_TEST_FAST:-0}" = 1 ]; then select=(-m "not np_run and not heavy"); fi
echo "ruff (lint), then pytest on both cores with mypy --strict (types) beside it (one pytest worker per core,"
echo "each test file on one worker so its module fixtures run once, the longest files first: tests/conftest.py)${select:+; only the tests without a full np run or a seconds-long lowering}"
python -m ruff check src tests bench scripts
# mypy runs beside pytest: alone it keeps one core busy for half a minute while the other waits; its verdict is
# printed and counted after the tests (a type error still fails make test)
types_log=$(mktemp)
python -m mypy src/np_optimizer >"$types_log" 2>&1 &
types_pid=$!
tests_rc=0
python -m pytest -q -n "${NP_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "${select[@]}" "$@" || tests_rc=$?
types_rc=0
wait "$types_pid" || types_rc=$?
echo "mypy --strict:"
cat "$types_log"
rm -f "$types_log"
if [ "$types_rc" != 0 ]; then echo "mypy --strict found type errors (above)"; fi
if [ "$tests_rc" != 0 ]; then exit "$tests_rc"; fi
exit "$types_rc"
