"""Benchmark: MACs of a recurrent model, np's count against a hand count, per layer (issue 27, item 3).

The model is the one a user reported: Conv1d(40, 64, 3) over 49 steps, a 2-layer LSTM(64 -> 128), a GRU(128 -> 64) and
a Linear(64, 12) head, which np once counted as 377,088 MACs (conv and linear only). It goes through np's own graph
extraction (the model file copied into a project folder as `np projects create --model file.py:factory` does, loaded
and exported as np run's INPUT_MODEL is), then np's count per node, attributed to its module, is printed beside

    gates x (input width + hidden) x hidden x steps x batch, per layer and direction (LSTM 4 gates, GRU 3)

    .venv/bin/python bench/recurrent_macs.py
"""

from __future__ import annotations

import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import _common  # noqa: E402,F401  (drops bench/ from sys.path: bench/profile.py would shadow the stdlib's)

MODEL = '''
import torch
from torch import nn


class Kws(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(40, 64, 3, padding=1)
        self.lstm = nn.LSTM(64, 128, num_layers=2, batch_first=True)
        self.gru = nn.GRU(128, 64, batch_first=True)
        self.fc = nn.Linear(64, 12)

    def forward(self, x):
        y = torch.relu(self.conv(x)).transpose(1, 2)
        y, _ = self.lstm(y)
        y, _ = self.gru(y)
        return self.fc(y[:, -1])


def kws():
    torch.manual_seed(0)
    return Kws().eval(), (torch.randn(1, 40, 49),)
'''
STEPS = 49
HAND = {  # module -> (formula, MACs)
    "conv": ("C_out x C_in x kernel x steps = 64 x 40 x 3 x 49", 64 * 40 * 3 * STEPS),
    "lstm": ("4 x (64 + 128) x 128 x 49  +  4 x (128 + 128) x 128 x 49",
             4 * (64 + 128) * 128 * STEPS + 4 * (128 + 128) * 128 * STEPS),
    "gru": ("3 x (128 + 64) x 64 x 49", 3 * (128 + 64) * 64 * STEPS),
    "fc": ("64 x 12 (last step only)", 64 * 12),
}
REPORTED_BEFORE = 377_088  # np's count before recurrent layers were counted (conv and linear)


def main() -> int:
    from np_optimizer.graph.program_io import export_model
    from np_optimizer.graph.stats import count_macs
    from np_optimizer.layers.keys import module_of
    from np_optimizer.models.source import copy_model_into, load_model

    folder = Path(tempfile.mkdtemp(prefix="np-bench-rnn-"))
    (folder / "kws.py").write_text(MODEL)
    project = folder / "project"
    spec = copy_model_into(f"{folder / 'kws.py'}:kws", project)  # what np projects create does with --model
    loaded = load_model(spec, project)  # what np run's graph extraction does
    start = time.perf_counter()
    with warnings.catch_warnings():  # nn.LSTM's _flat_weights "assigned during export": torch's, not ours
        warnings.simplefilter("ignore")
        program = export_model(loaded.module, loaded.example_inputs)  # type: ignore[arg-type]
    exported_s = time.perf_counter() - start
    start = time.perf_counter()
    total, per_node = count_macs(program)
    counted_s = time.perf_counter() - start
    nodes = {n.name: n for n in program.graph.nodes}
    by_module: dict[str, tuple[str, int]] = {}
    for name, macs in per_node.items():
        module, _cls = module_of(nodes[name].meta.get("nn_module_stack")) or (name, "")
        op = str(nodes[name].target)
        by_module[module] = (op if module not in by_module else f"{by_module[module][0]}, {op}",
                             by_module.get(module, ("", 0))[1] + macs)
    print("Conv1d(40,64,3) + LSTM(64->128, 2 layers) + GRU(128->64) + Linear(64,12), 49 steps, batch 1")
    print(f"  exported by np's graph extraction in {exported_s:.1f} s; counted in {counted_s * 1000:.1f} ms")
    print(f"  {'layer':<6} {'exported op':<22} {'np MACs':>12} {'hand count':>12}  formula")
    mismatches = 0
    for module, (formula, hand) in HAND.items():
        op, macs = by_module.get(module, ("(none)", 0))
        mismatches += macs != hand
        print(f"  {module:<6} {op:<22} {macs:>12,} {hand:>12,}  {formula}{'' if macs == hand else '   MISMATCH'}")
    hand_total = sum(h for _f, h in HAND.values())
    print(f"  {'total':<6} {'':<22} {total:>12,} {hand_total:>12,}")
    print(f"  before recurrent layers were counted: {REPORTED_BEFORE:,} MACs "
          f"({total - REPORTED_BEFORE:,} missing, {100 * (total - REPORTED_BEFORE) / total:.1f}% of the model)")
    return 1 if mismatches or total != hand_total else 0


if __name__ == "__main__":
    sys.exit(main())
