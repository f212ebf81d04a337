#!/usr/bin/env bash
# make demo: a workspace with the built-in samples; each is validated, run (steps, compilation, profiling) and
# reported. sample_cpu is also measured on this machine (`host`) after the run, so its report shows measured latency
# and memory beside the MLIA figures. Each sample's report is also written as one HTML page (np report --html).
# sample_digits targets this machine and has a labelled dataset, so its report shows TOP1 accuracy next to measured
# latency.
set -euo pipefail
dir="${DEMO_DIR:-demo-workspace}"
np workspace init "$dir"
samples=$(cd "$dir" && ls -d sample_*/ | tr -d /)
for sample in $samples; do
  echo
  echo "=================== $sample ==================="
  cd "$dir/$sample/experiment_01"
  np validate
  np run --dry-run
  np run --retry
  if [ "$sample" != "sample_npu" ] && [ "$sample" != "sample_digits" ]; then  # sample_digits targets host already
    np profile --method on-device -d host
  fi
  np report
  np report --html   # prints "HTML report: <path>"
  cd - >/dev/null
done
echo
echo "Demo workspace: $dir (np report inside any experiment folder shows its table again; the HTML pages are"
echo "$dir/<sample>/experiment_01/report.html)."
