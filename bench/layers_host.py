"""Benchmark: do the per-layer host times add up to the latency the user sees, on tiny models?

sample_cpu's model (small_cnn: its GO checkpoint fp32, its GQ checkpoint W8-A8) and three CNNs under 0.2 ms built
here (a keyword-spotting DS-CNN, a LeNet-5 for digits, a micro MobileNet-V2), each compiled for `host` by np and
measured by np's on-device method (timed runs, then traced runs in the same process). Prints, per model:

- rows / untraced: every row of `np report --layers` (the layers, the delegate overhead, the runtime framing and the
  time outside Method::execute) against the round's untraced median latency; target within 15 %;
- layers+outside / untraced: the same without the delegate-overhead and framing rows;
- layers / untraced: the layer rows alone (what the issue measured: 0.64 to 0.81 before);
- rows / traced: the rows inside execute against the traced runs' median execute time; within 2 % on a quiet machine;
- tracing cost: the traced median execute against the untraced latency (which includes the time outside execute).

Both medians come from the same measuring process, one after the other; on a shared machine compare ratios.

    python bench/layers_host.py [--runs 200] [--traced 100] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

# Python puts this folder first on sys.path, where bench/profile.py would shadow the standard library's `profile`
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import logging  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from typing import Any  # noqa: E402


def tiny_cnn(name: str) -> tuple[Any, tuple[Any, ...]]:
    """One of the three small CNNs: "kws_dscnn" (10x49 MFCCs, a 10x4 conv, four depthwise-separable blocks, an
    average pool over the 25x5 map), "lenet5" (28x28 digits) or "micro_mobilenet" (32x32, inverted residuals)."""
    import torch
    from torch import nn

    def separable(c: int) -> nn.Module:
        return nn.Sequential(nn.Conv2d(c, c, 3, padding=1, groups=c), nn.BatchNorm2d(c), nn.ReLU(),
                             nn.Conv2d(c, c, 1), nn.BatchNorm2d(c), nn.ReLU())

    class Inverted(nn.Module):
        def __init__(self, c: int, expand: int) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(c, c * expand, 1), nn.ReLU6(),
                                      nn.Conv2d(c * expand, c * expand, 3, padding=1, groups=c * expand), nn.ReLU6(),
                                      nn.Conv2d(c * expand, c, 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.body(x)

    torch.manual_seed(0)
    if name == "kws_dscnn":
        model = nn.Sequential(nn.Conv2d(1, 32, (10, 4), stride=2, padding=(5, 1)), nn.BatchNorm2d(32), nn.ReLU(),
                              *[separable(32) for _ in range(4)], nn.AvgPool2d((25, 5)), nn.Flatten(),
                              nn.Linear(32, 12))
        example = torch.randn(1, 1, 49, 10)
    elif name == "lenet5":
        model = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5),
                              nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(),
                              nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
        example = torch.randn(1, 1, 28, 28)
    else:
        model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU6(), Inverted(8, 4),
                              nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU6(), Inverted(16, 4),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
        example = torch.randn(1, 3, 32, 32)
    return model.eval(), (example,)


def build(name: str, out: Path) -> list[tuple[str, Path, Any, Path]]:
    """(label, compiled folder, CompileResult, .pt2) for fp32 and W8-A8 of one model."""
    import torch

    from np_optimizer.compile import compile_checkpoint
    from np_optimizer.devices import get_device
    from np_optimizer.graph.program_io import export_model, save_program
    from np_optimizer.models.zoo import build_builtin
    from np_optimizer.quantize.pt2e import quantize_program

    model, example = build_builtin(name) if name == "small_cnn" else tiny_cnn(name)
    calibration = [example] + [tuple(torch.randn_like(t) for t in example) for _ in range(3)]
    built = []
    for scheme in ("fp32", "W8-A8"):
        program = export_model(model, example)
        if scheme != "fp32":
            program = quantize_program(program, backend="xnnpack", scheme=scheme, target=None,
                                       calibration=calibration)
        path = save_program(program, out / f"{name}_{scheme}.pt2")
        compiled = compile_checkpoint(path, get_device("host"), out / f"compiled_{name}_{scheme}")
        assert compiled.status == "ok", compiled.reason
        built.append((f"{name} {scheme}", out / f"compiled_{name}_{scheme}", compiled, path))
    return built


def measure(label: str, folder: Path, compiled: Any, pt2: Path, out: Path, runs: int, traced: int) -> dict[str, Any]:
    from np_optimizer.devices import get_device
    from np_optimizer.layers.files import read_layers
    from np_optimizer.profiler.methods import get_method
    from np_optimizer.profiler.request import ProfileRequest

    work = out / "rounds" / f"{label.replace(' ', '_')}-{time.time_ns()}"
    request = ProfileRequest(checkpoint=label, job="bench", program_path=pt2, program_sha256="", compiled=compiled,
                             compiled_dir=folder, device=get_device("host"),
                             options={"num_executions": runs, "warmup": 10, "timeout": 300,
                                      "num_layer_executions": traced},
                             work_dir=work, log=logging.getLogger("np.Bench"))
    output = get_method("on-device").profile(request)
    if "layers" not in output.artifacts:
        raise SystemExit(f"{label}: no per-layer times: {output.warnings}")
    document = read_layers(work / output.artifacts["layers"])
    costs = {e["key"]: e["cost"] for e in document["layers"]}
    untraced = output.extras["latency_ms"]["median"]
    owned = sum(e["cost"] for e in document["layers"] if not e.get("unowned"))
    outside = costs.get("(outside execute)", 0.0)
    return {"untraced": untraced, "execute": document["cost"]["execute_median"], "outside": outside,
            "layers": len([e for e in document["layers"] if not e.get("unowned")]),
            "with_outside": (owned + outside) / untraced, "overhead": costs.get("(delegate overhead)", 0.0),
            "estimators": sorted({e["estimator"] for e in document["layers"]}), **document["ratios"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="timed (untraced) runs per round (200)")
    parser.add_argument("--traced", type=int, default=100, help="traced runs per round (100)")
    parser.add_argument("--out", type=Path, default=None, help="keep the files here (default: a temp folder)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="np-bench-layers-"))
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=out / "bench.log", level=logging.INFO)
    from np_optimizer.logs import quiet_native_output

    print(f"{'model':24} {'untraced ms':>11} {'execute ms':>10} {'outside ms':>10} {'layers':>6} "
          f"{'rows/untraced':>13} {'layers+outside/untraced':>23} {'layers/untraced':>15} {'rows/traced':>11} "
          f"{'tracing cost':>12}")
    worst = 0.0
    for name in ("small_cnn", "kws_dscnn", "lenet5", "micro_mobilenet"):
        with quiet_native_output(out / "bench.log"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built = build(name, out)
        for label, folder, compiled, pt2 in built:
            r = measure(label, folder, compiled, pt2, out, args.runs, args.traced)
            if r["untraced"] >= 0.010:
                worst = max(worst, abs(r["rows_vs_untraced_median"] - 1))
            print(f"{label:24} {r['untraced']:11.4f} {r['execute']:10.4f} {r['outside']:10.4f} {r['layers']:6d} "
                  f"{r['rows_vs_untraced_median']:13.3f} {r['with_outside']:23.3f} "
                  f"{r['layers_vs_untraced_median']:15.3f} {r['rows_vs_traced_execute']:11.3f} "
                  f"{r['tracing_cost_pct']:+11.1f}%")
    print(f"worst: rows/untraced off by {100 * worst:.1f}% on the models of 10 us or more (target 15%)")
    print(f"files: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
