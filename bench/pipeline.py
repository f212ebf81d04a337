"""Benchmark: the sample CNN through np run (GO + GQ W8-A8 for XNNPACK).

Prints the three figures issue 3 asks for, measured in this one run: the GRAPH_QUANTIZE .pte against INPUT_MODEL's
(size ratio, target >= 3x), that the int8 .pte runs on this machine's ExecuTorch runtime, and its output SNR against
INPUT_MODEL (target > 20 dB); plus the wall time of each step.

    .venv/bin/python bench/pipeline.py
"""

from __future__ import annotations

import json
import sys
import time

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))

from _common import workspace  # noqa: E402  (also keeps bench/profile.py from shadowing the stdlib's profile)


def main() -> int:
    from np_optimizer import api

    root = workspace()
    exp = root / "sample_cpu" / "experiment_01"
    start = time.perf_counter()
    summary = api.run(experiment=str(exp))
    total = time.perf_counter() - start
    jobs = {p.parent.name: json.loads(p.read_text()) for p in sorted(exp.glob("[0-9][0-9]_*/job.json"))}
    print(f"np run of sample_cpu (small_cnn, raspberry_pi_5 / executorch / xnnpack): {summary.status}, {total:.1f} s")
    print(f"{'job':<20} {'wall s':>8} {'.pt2 B':>10} {'.pte B':>10} {'delegated':>10} {'SNR dB (program)':>17} "
          f"{'SNR dB (.pte on host)':>22}")
    for name, job in jobs.items():
        fidelity = job.get("fidelity") or {}
        program = (fidelity.get("program") or {}).get("snr_db")
        pte = (fidelity.get("pte") or {}).get("snr_db")
        compiled = job["compile"]
        print(f"{name:<20} {job['duration_s']:>8.2f} {job['output']['size_bytes']:>10,} {compiled['pte_bytes']:>10,} "
              f"{compiled['delegated_ops']:>4}/{compiled['delegated_ops'] + compiled['non_delegated_ops']:<5} "
              f"{'ref' if program is None else f'{program:.2f}':>17} {'ref' if pte is None else f'{pte:.2f}':>22}")
    fp32 = jobs["00_input_model"]["compile"]["pte_bytes"]
    int8 = jobs["02_graph_quantize"]["compile"]["pte_bytes"]
    gq_fidelity = jobs["02_graph_quantize"]["fidelity"]
    ratio = fp32 / int8
    ran = "pte" in gq_fidelity
    snr = gq_fidelity["pte"]["snr_db"] if ran else None
    print()
    print(f"GRAPH_QUANTIZE .pte size: {int8:,} B vs INPUT_MODEL {fp32:,} B -> {ratio:.2f}x smaller "
          f"(target >= 3x: {'met' if ratio >= 3 else 'NOT met'})")
    print(f"GRAPH_QUANTIZE .pte runs on the host ExecuTorch runtime: {'yes' if ran else 'NO: ' + gq_fidelity.get('pte_error', '?')}"
          f" ({gq_fidelity.get('inputs')} evaluation inputs)")
    print(f"GRAPH_QUANTIZE SNR vs INPUT_MODEL (.pte on host): {snr:.2f} dB (target > 20 dB: "
          f"{'met' if snr and snr > 20 else 'NOT met'})" if snr is not None else "SNR: not measured")
    return 0 if ratio >= 3 and ran and snr and snr > 20 else 1


if __name__ == "__main__":
    raise SystemExit(main())
