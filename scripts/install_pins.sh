#!/usr/bin/env bash
# Install the pinned packages of requirements.lock into the venv whose python is $1, before `make venv` has pip
# resolve np against the same pins (which then finds them installed and adds only what a pin leaves out).
# Why: pip resolves and unpacks one file at a time, so its install kept one core busy for 44 s while the other waited;
# two `--no-deps` installs of the pins side by side took 17 s, and the resolving install after them 6 s (measured in
# a fresh clone, 2026-12-07). mlia-converters-pytorch is left to the Makefile's own --no-deps line (see pyproject.toml).
set -euo pipefail
py=$1
pins=$(mktemp -d)
trap 'rm -rf "$pins"' EXIT
grep -E '^[A-Za-z0-9_.-]+==' requirements.lock | grep -v '^mlia-converters-pytorch==' | sed 's/ *#.*//' > "$pins/all"
awk 'NR % 2 == 1' "$pins/all" > "$pins/a"
awk 'NR % 2 == 0' "$pins/all" > "$pins/b"
install() { "$py" -m pip install --quiet --disable-pip-version-check --no-compile --no-deps -r "$1" 2>&1 \
  | sed '/is ignored: it is neither a file nor a directory/d'; }
install "$pins/a" & first=$!
install "$pins/b" || { wait "$first" || true; exit 1; }
wait "$first"
