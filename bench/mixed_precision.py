"""Benchmark (issue 37, item 5): the sweep's mixed strategy against uniform W8-A8 and W8-A16 on Ethos-U.

For each model and each device, a fresh project (GQ W8-A8, a few calibration samples) and one `np sweep` with

    strategy: {mixed: {candidates: [W8-A8, W8-A16], budget: latency, from: FROM}}   (points, rest: the defaults)
    objectives: [{latency: min}, {snr: max}]     method: mlia (Vela's performance model through MLIA)

which runs uniform W8-A8, uniform W8-A16 (one of them measures the per-layer sensitivity: FROM, default widest)
and the mixed points (the strategy's defaults: 8 trials, `rest: both`, each k over the base and the widest scheme),
each a real trial compiled and estimated. cnn_raw and transformer get a calibration folder of samples of their own input
distribution (the first SAMPLES calibrate, later ones are the held-out SNR inputs). Models:

    sample_npu   the sample_npu project's model (small_cnn: a small residual CNN)
    cnn_raw      a small CNN on a raw 12-bit sensor's frames (an illumination ramp over 300..3700 and a texture of a
                 few units on it) whose first layer is a bank of point-symmetric zero-sum 3x3 filters: the ramp
                 cancels there, so the input and that layer need int16 and the later layers, fed the texture's
                 edges, care little (until 2026-12-07 a difference-of-Gaussians layer on 8-bit pixels whose output
                 kept a wide range, so that every layer needed int16: not the model the issue asks for)
    transformer  a one-block transformer (attention, MLP) whose tokens carry a few outlier channels, as transformer
                 activations do; its attention matmuls are the U55's int16 limit (they stay int8 there)

Devices: corstone_300 (Ethos-U55-128) and alif_e8 (Ethos-U85-256). Prints, per model and device, each point's
estimated latency and SNR, the search's wall time (the whole `np sweep`), and the done-when of issue 37: a mixed point
with SNR within 1 dB of uniform W8-A16 at a latency nearer uniform W8-A8's than W8-A16's; and whether a mixed point
lies above the straight line between the two uniform points.

    python bench/mixed_precision.py [--points N] [--from widest|base] [--rest both|widest|base]
                                    [--models sample_npu,cnn_raw,transformer] [--devices corstone_300,alif_e8]

Measured 2026-12-07 18:08 UTC with the strategy's one default configuration for every model and device (`from:
widest`, `rest: both`, `points: 8`, i.e. `python bench/mixed_precision.py`), after the sensitivity moved to the
calibration samples plus a held-out split (the dataset's samples past the calibration and evaluation ones: 5 for
cnn_raw and the transformer, none for sample_npu, which has no dataset; pipeline/sensitivity.py) and `rest: both` became the default (sweep/mixed.py); 4 calibration samples; load average
3.1-3.9 (2 cores shared with other benches: the search walls move with it, the latencies are Vela's estimates). MLIA's
latency in ms / SNR in dB on the held-out evaluation inputs; the best mixed point is the cheapest within 1 dB of
W8-A16 where there is one, else the one with the best SNR under the midpoint latency.

    model        device        search  W8-A8           W8-A16          best mixed                      done-when
    sample_npu   corstone_300  277 s   0.908 / 40.57   1.881 / 50.71   widest k=4: 1.248 / 50.39       yes
    sample_npu   alif_e8       215 s   0.257 / 40.57   0.533 / 50.71   widest k=4: 0.355 / 50.39       yes
    transformer  corstone_300  335 s   0.0495 / 10.24  0.0689 / 13.25  base k=4: 0.0514 / 12.99        yes
    transformer  alif_e8       321 s   0.0130 / 10.24  0.0180 / 13.45  base k=4: 0.0138 / 12.99        yes
    cnn_raw      corstone_300   89 s   0.0330 / -0.58  0.0405 / 24.51  (k=4: 0.0462 / 22.68)           no
    cnn_raw      alif_e8        87 s   0.0176 / -0.58  0.0215 / 24.51  base k=2: 0.0195 / 18.37        no

So the done-when holds on sample_npu and the transformer, on both devices, with one configuration (before: sample_npu
needed `rest: widest` and the transformer `rest: base`, and the transformer missed on the U85 by 1.01 dB). On both
transformers the k=4 point is `<input>`, embed, head and `<output>` in int16 over an int8 rest: held-out, head and
`<output>` lose 4.8 and 4.5 dB in int8, which the 4 calibration samples hid (+0.7 dB for `<output>` there; the last
measurement's k=2, `<input>` and embed alone, stayed at 12.44 dB). On sample_npu the `widest` points are the ones on
the front (int16 adds and pools, the layers not moved in int8: k=2 1.260 / 50.30 on U55 too); its `base` points stay
near 41 dB.

Why not on cnn_raw: on held-out inputs W8-A16's SNR sits in every weighted layer (dropped alone to int8 from W8-A16:
`<input>` -37.7 dB, conv1 -33.5, head -5.3, `<output>` -5.3, conv2 -0.4 and conv3 -0.3 on the calibration samples
plus the held-out split; conv2 and conv3 -1.6 and -1.5 on the evaluation inputs), so a point within 1 dB of W8-A16's 24.51 needs nearly every layer in
int16 (k=4, `<input>`, conv1, head, `<output>`: 22.68 dB; k=6 is uniform W8-A16 again), and on this small model int16
conv1 and the int8/int16 RESCALEs cost about what they save: on U55 k=2 (`<input>`, conv1) is already 0.0437 ms
against W8-A16's 0.0405 (conv1 7,698 cycles in int16 against 2,348), on U85 0.0195 against a midpoint of 0.0196.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Python puts this folder first on sys.path, where bench/profile.py would shadow the standard library's `profile`
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

MODELS_SOURCE = '''
import torch
from torch import nn


class HighPass(nn.Conv2d):
    """Second-derivative filters on a raw sensor's readings: each 3x3 kernel is point-symmetric and sums to zero, so
    the reading's level and its linear illumination ramp cancel (the texture stays), and sits on the int8 weight grid
    (per channel, max |w| = 127 steps), so that int8 weight rounding (in W8-A8 and W8-A16 alike) leaves no residue of
    the level in the output."""

    def __init__(self, filters=8):
        super().__init__(1, filters, 3)  # no padding: a zero border would not cancel the level
        generator = torch.Generator().manual_seed(3)
        with torch.no_grad():
            for i in range(filters):
                while True:  # pairs (w, its point-mirror): one at 127, the centre -2 x their sum
                    pairs = torch.randint(-90, 91, (4,), generator=generator).float()
                    pairs[i % 4] = 127.0
                    centre = -2 * pairs.sum()
                    if abs(centre) <= 127:
                        break
                a, b, d, e = pairs.tolist()
                w = torch.tensor([[a, b, d], [e, centre, e], [d, b, a]])
                self.weight[i, 0] = w / 127.0
            self.bias.zero_()


class RawCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = HighPass()
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.head = nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        x = torch.relu(self.conv3(x))
        return self.head(x.flatten(1))


def raw_input(generator=None):
    """A raw 12-bit sensor frame: an illumination ramp across the frame (its direction changes from frame to frame,
    its readings span 300..3700 in each) and a texture of a few units on it. In int8 the input's step (3400 / 255,
    about 13) drowns the texture; in int16 it stays. After conv1 (the ramp cancelled) the activations are the
    texture's edges: a narrow, even range that int8 holds."""
    angle = 6.2832 * torch.rand(1, generator=generator)
    grid = torch.arange(16.0) - 7.5
    ramp = torch.cos(angle) * grid[None, :] + torch.sin(angle) * grid[:, None]
    coarse = torch.randn(1, 1, 4, 4, generator=generator) * 3
    texture = torch.nn.functional.interpolate(coarse, size=(16, 16), mode="bilinear", align_corners=False)
    frame = 2000 + 1700 * ramp / ramp.abs().max() + texture + 0.5 * torch.randn(1, 1, 16, 16, generator=generator)
    return frame.clamp(300, 3700)


def raw_cnn():
    torch.manual_seed(0)
    return RawCNN().eval(), (raw_input(torch.Generator().manual_seed(99)),)


class Block(nn.Module):
    def __init__(self, d=32, heads=2):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.embed = nn.Linear(d, d)
        self.q, self.k, self.v, self.out = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.head = nn.Linear(d, 4)

    def forward(self, x):
        b, t, d = x.shape
        x = self.embed(x)
        q = self.q(x).view(b, t, self.heads, self.dh).transpose(1, 2)
        k = self.k(x).view(b, t, self.heads, self.dh).transpose(1, 2)
        v = self.v(x).view(b, t, self.heads, self.dh).transpose(1, 2)
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * self.dh ** -0.5, dim=-1)
        x = x + self.out(torch.matmul(att, v).transpose(1, 2).reshape(b, t, d))
        x = x + self.down(torch.relu(self.up(x)))
        return self.head(x.mean(dim=1))


def tokens(generator=None):
    x = torch.randn(1, 8, 32, generator=generator)
    x[..., :2] *= 60.0  # outlier channels, as transformer activations have
    return x


def transformer():
    torch.manual_seed(0)
    return Block().eval(), (tokens(torch.Generator().manual_seed(99)),)


def write_dataset(kind, folder, count=16):
    """Samples of the model's own input distribution (generated noise would miss the spikes and outliers)."""
    folder.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(7)
    for i in range(count):
        torch.save(raw_input(generator) if kind == "cnn_raw" else tokens(generator), folder / f"{i:03d}.pt")
'''

RUN_YAML = 'version: "1.0"\nsteps:\n- graph_quantize:\n  - scheme: W8-A8\nprofile: [GRAPH_QUANTIZE]\n'
DETAIL_YAML = "detail:\n  graph_quantize[0]:\n    calibration:\n      num_samples: {samples}\n"
SWEEP_YAML = """version: "1.0"
method: mlia
objectives: [{{latency: min}}, {{snr: max}}]
strategy: {{mixed: {{candidates: [W8-A8, W8-A16], budget: latency, from: {measure_from}{extra}}}}}
"""
DEVICES = ("corstone_300", "alif_e8")
print = functools.partial(print, flush=True)  # noqa: A001  (a long run: each model's table as soon as it is done)
MODELS = ("sample_npu", "cnn_raw", "transformer")


def _project(root: Path, source: Path, model: str, device: str, samples: int) -> Path:
    from np_optimizer import api

    spec = {"sample_npu": "small_cnn", "cnn_raw": f"{source}:raw_cnn", "transformer": f"{source}:transformer"}[model]
    name = f"{model}_{device}"
    data = None
    if model != "sample_npu":
        data = root.parent / "data" / model
        if not data.is_dir():
            subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(source.parent)!r}); "
                            f"from pathlib import Path; import models; models.write_dataset({model!r}, "
                            f"Path({str(data)!r}))"], check=True)
    api.projects_create(name=name, model=spec, device=device, cwd=root,
                        calibration_dataset=str(data) if data else None)
    exp = Path(api.experiments_create(steps="gq", project=name, cwd=root).path)
    (exp / "run.yaml").write_text(RUN_YAML)
    (exp / "run.detail.yaml").write_text(DETAIL_YAML.format(samples=samples))
    return exp.parent


def _sweep(project: Path, points: int | None, measure_from: str, rest: str | None
           ) -> tuple[float, dict[str, Any], str]:
    # points and rest only when asked: else the strategy's defaults (8 trials; each k over both schemes)
    extra = "".join(f", {key}: {value}" for key, value in (("points", points), ("rest", rest)) if value is not None)
    (project / "sweep.yaml").write_text(SWEEP_YAML.format(measure_from=measure_from, extra=extra))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "np_optimizer", "sweep", "--workers", "1"], cwd=project,
                          capture_output=True, text=True, env=os.environ.copy())
    wall = time.perf_counter() - start
    record = json.loads((project / "sweep" / "trials.json").read_text()) if (
        project / "sweep" / "trials.json").is_file() else {"trials": []}
    return wall, record, proc.stderr if proc.returncode else ""


def _verdict(points: list[dict[str, Any]]) -> tuple[str, str]:
    """The done-when (within 1 dB of W8-A16's SNR at a latency nearer W8-A8's) and 'above the line'."""
    by = {p["label"]: p for p in points}
    a8, a16 = by.get("W8-A8"), by.get("W8-A16")
    mixed = [p for p in points if p["label"].startswith("mixed") and p["latency"] is not None and p["snr"] is not None]
    if not a8 or not a16 or a8["latency"] is None or a16["latency"] is None or a8["snr"] is None or a16["snr"] is None:
        return "n/a (a uniform point is missing)", "n/a"
    (l8, s8), (l16, s16) = (a8["latency"], a8["snr"]), (a16["latency"], a16["snr"])
    done = [p for p in mixed if p["snr"] >= s16 - 1.0 and abs(p["latency"] - l8) < abs(p["latency"] - l16)]
    above = [p for p in mixed if l16 != l8 and p["snr"] > s8 + (s16 - s8) * (p["latency"] - l8) / (l16 - l8)]
    return ("yes: " + ", ".join(p["label"] for p in done) if done else "no"), \
        ("yes: " + ", ".join(p["label"] for p in above) if above else "no")


def _points(record: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for t in sorted(record["trials"], key=lambda t: (t["params"]["mixed.scheme"].startswith("mixed"),
                                                      t["params"]["mixed.moves"], t["number"])):
        scheme, k = t["params"]["mixed.scheme"], t["params"]["mixed.moves"]  # "mixed", or "mixed base|widest"
        values = t.get("values") or {}
        out.append({"label": scheme if not scheme.startswith("mixed") else f"{scheme} k={k}", "state": t["state"],
                    "latency": values.get("LATENCY"), "snr": values.get("SNR"), "formats": t.get("formats") or {},
                    "reason": t.get("reason")})
    return out


def sensitivity_line(project: Path, record: dict[str, Any]) -> str:
    """What the first trial's sensitivity found: the moves the plan had, and the best single-layer gain."""
    files = [f for t in record["trials"] if t["number"] in (0, 1)
             for f in (project / t["experiment"]).glob("*/artifacts/layers_sensitivity.json")]
    if not files:
        return "no sensitivity file"
    doc = json.loads(files[0].read_text())
    gains = [(cell.get("snr_loss_db"), layer["module"]) for layer in doc["layers"]
             for fmt, cell in layer["formats"].items() if fmt != doc["base"] and cell.get("snr_loss_db") is not None]
    # from the base the largest gain matters, from the widest the largest loss (a layer alone dropped to the base)
    best = max(gains, key=lambda g: abs(g[0])) if gains else (None, "-")
    io = "; ".join(f"{layer['module']} {cell.get('snr_loss_db')} dB" for layer in doc["layers"]
                   if layer["module"].startswith("<") for fmt, cell in layer["formats"].items() if fmt != doc["base"])
    unpriced = sum(1 for layer in doc["layers"] for cell in layer["formats"].values() if cell.get("cost") is None)
    return (f"sensitivity from uniform {doc['base']}: largest single-layer SNR change {best[0]} dB ({best[1]}); "
            f"{io or 'no <input>/<output> rows'}; "
            f"{unpriced} (layer, format) cell(s) without a cost; {doc['seconds']['total']:.0f} s of the search")


def _fmt(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=None, help="mixed trials (default: the strategy's, 8)")
    parser.add_argument("--samples", type=int, default=4, help="calibration samples")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--devices", default=",".join(DEVICES))
    parser.add_argument("--from", dest="measure_from", default="widest", choices=("base", "widest"),
                        help="the uniform trial that measures the sensitivity (the strategy's `from`)")
    parser.add_argument("--rest", choices=("both", "base", "widest"), default=None,
                        help="the mixed points' scheme (the strategy's `rest`; default: the strategy's, both)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="np-bench-mixed-"))
    os.environ["NP_CACHE_DIR"] = str(root / "cache")
    from np_optimizer import api

    api.workspace_init(root / "ws")
    (root / "models.py").write_text(MODELS_SOURCE)
    summary = []
    for model in args.models.split(","):
        for device in args.devices.split(","):
            project = _project(root / "ws", root / "models.py", model, device, args.samples)
            wall, record, failed = _sweep(project, args.points, args.measure_from, args.rest)
            points = _points(record)
            done, above = _verdict(points)
            print(f"\n{model} on {device}: search {wall:.0f} s ({len(points)} trials){'; np sweep failed' if failed else ''}")
            if failed:
                print("  " + failed.strip().splitlines()[-1][:200])
            print(f"  {'point':<18} {'latency (ms)':>13} {'SNR (dB)':>9}  formats / reason")
            for p in points:
                said = ", ".join(f"{m}: {f}" for m, f in p["formats"].items()) or ("uniform" if p["state"] ==
                                                                                   "complete" else "")
                if p["state"] != "complete":
                    said = f"{p['state']}: {p['reason']}"
                print(f"  {p['label']:<18} {_fmt(p['latency'], 4):>13} {_fmt(p['snr'], 2):>9}  {said[:110]}")
            print(f"  {sensitivity_line(project, record)}")
            print(f"  done-when (SNR within 1 dB of W8-A16, latency nearer W8-A8's): {done}")
            print(f"  a mixed point above the line between the uniform points: {above}")
            summary.append((model, device, wall, done, above))
    print("\nmodel        device        search (s)  done-when  above the line")
    for model, device, wall, done, above in summary:
        print(f"{model:<12} {device:<13} {wall:>10.0f}  {done.split(':')[0]:<9}  {above.split(':')[0]}")
    print(f"\n(workspace kept in {root})")


if __name__ == "__main__":
    main()
