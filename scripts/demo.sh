#!/usr/bin/env bash
# make demo: a workspace with the built-in samples, validated and planned.
set -euo pipefail
dir="${DEMO_DIR:-demo-workspace}"
np workspace init "$dir"
for sample in sample_cpu sample_npu; do
  echo
  echo "=== $sample ==="
  (cd "$dir/$sample/experiment_01" && np validate && np run --dry-run)
done
