"""Benchmark: per-layer host times (the on-device method's traced pass) against the untraced measurement, in one run.

For the sample's small_cnn and a ResNet-18-like CNN built here, fp32 and W8-A8, each compiled for `host` by np and
measured by np's on-device method (timed runs, then traced runs in the same process), prints:

- rows / traced: the per-layer rows plus the unowned rows (delegate overhead, runtime framing) against the traced
  runs' median Method::execute time; target within 2 %;
- layers / untraced: the layer rows alone against the untraced median latency; target within 15 %;
- tracing cost: the traced median against the untraced one.

Both medians come from the same measuring process, one after the other; on a shared machine compare ratios.

    python bench/layers_host.py [--runs 100] [--traced 50] [--out DIR]
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


def resnet18_like() -> tuple[Any, tuple[Any, ...]]:
    """ResNet-18's shape (a 7x7 stem, four stages of two basic blocks, 64 to 512 channels) on a 112x112 input."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
            self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)) \
                if stride != 1 or cin != cout else nn.Identity()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))) + self.down(x))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
            widths = [(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)]
            self.layers = nn.Sequential(*[nn.Sequential(Block(a, b, s), Block(b, b, 1)) for a, b, s in widths])
            self.fc = nn.Linear(512, 1000)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.layers(self.stem(x)).mean(dim=(2, 3)))

    torch.manual_seed(0)
    return Net().eval(), (torch.randn(1, 3, 112, 112),)


def build(name: str, out: Path) -> list[tuple[str, Path, Any, Path]]:
    """(label, compiled folder, CompileResult, .pt2) for fp32 and W8-A8 of one model."""
    import torch

    from np_optimizer.compile import compile_checkpoint
    from np_optimizer.devices import get_device
    from np_optimizer.graph.program_io import export_model, save_program
    from np_optimizer.models.zoo import build_builtin
    from np_optimizer.quantize.pt2e import quantize_program

    model, example = build_builtin(name) if name == "small_cnn" else resnet18_like()
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
    return {"untraced": output.extras["latency_ms"]["median"], "traced": document["cost"]["total"],
            "layers": len([e for e in document["layers"] if not e.get("unowned")]), **document["ratios"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="timed (untraced) runs per round (100)")
    parser.add_argument("--traced", type=int, default=50, help="traced runs per round (50)")
    parser.add_argument("--out", type=Path, default=None, help="keep the files here (default: a temp folder)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="np-bench-layers-"))
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=out / "bench.log", level=logging.INFO)
    from np_optimizer.logs import quiet_native_output

    print(f"{'model':22} {'untraced ms':>12} {'traced ms':>10} {'layers':>7} {'rows/traced':>12} "
          f"{'layers/untraced':>16} {'tracing cost':>13}")
    worst = {"rows": 0.0, "layers": 0.0}
    for name in ("small_cnn", "resnet18_like"):
        with quiet_native_output(out / "bench.log"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built = build(name, out)
        for label, folder, compiled, pt2 in built:
            r = measure(label, folder, compiled, pt2, out, args.runs, args.traced)
            worst["rows"] = max(worst["rows"], abs(r["rows_vs_traced_execute"] - 1))
            worst["layers"] = max(worst["layers"], abs(r["layers_vs_untraced_median"] - 1))
            print(f"{label:22} {r['untraced']:12.4f} {r['traced']:10.4f} {r['layers']:7d} "
                  f"{r['rows_vs_traced_execute']:12.4f} {r['layers_vs_untraced_median']:16.4f} "
                  f"{r['tracing_cost_pct']:+12.1f}%")
    print(f"worst: rows/traced off by {100 * worst['rows']:.2f}% (target 2%), layers/untraced off by "
          f"{100 * worst['layers']:.1f}% (target 15%)")
    print(f"files: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
