"""Benchmark: what deferred code generation (adapters/torch_private.deferred_codegen, part of lean_lowering) saves
in an XNNPACK lowering, side by side in one process, and that the .pte stays the same.

The sample small_cnn, exported with np's own modules, fp32 and quantized in each XNNPACK scheme; each program lowered
and serialized (`backend.lower(...).edge.to_executorch().buffer`, as the compile does) under lean_lowering with its
other patches, `--rounds` times each way, alternating which way goes first. Printed per program: the median seconds
each way, their ratio per round (median and range), and whether the .pte bytes were the same in every round.

    python bench/lowering.py [--rounds 5]

Measured (2026-12-07 22:10, 2 cores, load 1.0 to 1.1, `--rounds 5`): median seconds plain -> deferred, ratio median
(range), the same .pte in every round for all four:

    fp32             1.663 -> 1.305   0.81 (0.77..0.91)
    W8-A8            2.425 -> 1.992   0.82 (0.66..0.97)
    W8-A8_dynamic    1.646 -> 1.438   0.87 (0.61..1.00)
    W4-A8_dynamic    1.436 -> 1.218   0.90 (0.60..1.18)
"""

from __future__ import annotations

import os
import sys

# Run as `python bench/lowering.py`, Python puts bench/ first on sys.path, and bench/profile.py there would shadow the
# standard library's `profile`. Drop that entry before importing anything.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import argparse  # noqa: E402
import contextlib  # noqa: E402
import copy  # noqa: E402
import hashlib  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from typing import Any  # noqa: E402


def programs() -> dict[str, Any]:
    from np_optimizer.graph.program_io import export_model
    from np_optimizer.models.zoo import build_builtin
    from np_optimizer.quantize.pt2e import quantize_program

    model, example = build_builtin("small_cnn")
    built = {"fp32": export_model(model, example)}
    for scheme in ("W8-A8", "W8-A8_dynamic", "W4-A8_dynamic"):
        built[scheme] = quantize_program(export_model(model, example), backend="xnnpack", scheme=scheme, target=None,
                                         calibration=[example])
    return built


def lower(program: Any, deferred: bool) -> tuple[float, str]:
    """Seconds to lower and serialize a copy of `program` (lean_lowering, with or without deferred_codegen); the
    .pte's sha256."""
    from np_optimizer.adapters import torch_private as tp
    from np_optimizer.backends.xnnpack import XNNPACK

    program = copy.deepcopy(program)
    patch = tp.deferred_codegen if deferred else contextlib.nullcontext
    real = tp.deferred_codegen
    tp.deferred_codegen = patch  # type: ignore[assignment]  # lean_lowering looks it up when it runs
    try:
        start = time.perf_counter()
        with tp.lean_lowering():
            buffer = XNNPACK.lower(program, None, None).edge.to_executorch().buffer  # type: ignore[arg-type]
        seconds = time.perf_counter() - start
    finally:
        tp.deferred_codegen = real
    return seconds, hashlib.sha256(buffer).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from np_optimizer.backends.traced_once import xnnpack_patterns

    warnings.simplefilter("ignore")
    built = programs()
    xnnpack_patterns()  # the pattern graphs both ways use, traced once before any timing
    for program in built.values():  # a first lowering of each, untimed: torch's and ExecuTorch's first calls
        lower(program, True)
    print(f"small_cnn, XNNPACK, {args.rounds} rounds, alternating; load average {os.getloadavg()[0]:.1f}")
    print(f"  {'program':<15}{'plain s':>9}{'deferred s':>12}   ratio deferred/plain (range)   same .pte")
    for name, program in built.items():
        plain, deferred, ratios, same = [], [], [], True
        for round_ in range(args.rounds):
            order = (False, True) if round_ % 2 == 0 else (True, False)
            got = {way: lower(program, way) for way in order}
            plain.append(got[False][0])
            deferred.append(got[True][0])
            ratios.append(got[True][0] / got[False][0])
            same = same and got[True][1] == got[False][1]
        print(f"  {name:<15}{statistics.median(plain):9.3f}{statistics.median(deferred):12.3f}   "
              f"{statistics.median(ratios):.2f} ({min(ratios):.2f}..{max(ratios):.2f})"
              f"{'':15}{'yes' if same else 'NO'}")
    print(f"load average now {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
