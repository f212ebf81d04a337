"""Benchmark: graph_quantize's `embedding` option on a BERT encoder (issue 27, item 2).

A 4-layer BERT (transformers BertConfig: hidden 256, 4 heads, intermediate 1024, vocab 30522; random weights, seed 0)
given to np as a factory file (`input_ids` int64[1, 32] -> last hidden state), one project on raspberry_pi_5, and one
np run per variant of GQ W8-A8: `embedding.bits` 8 (the default), 4 (groups of 32) and null (the tables float, the
behaviour before the option). The word embedding is 30522 x 256, 70% of the model's weights.

Prints, from each run's job.json and layers_snr.json: the INPUT_MODEL (fp32) and GRAPH_QUANTIZE .pte sizes (MiB) and
their ratio (target >= 3x), the output SNR against INPUT_MODEL of the exported program and of the .pte run on this
machine's ExecuTorch runtime, the SNR of the word embedding's own output and of its table, and the weights left float
in the checkpoint (which layers, how many bytes).

    .venv/bin/python bench/embeddings.py [--calibration 32] [--variants 8,4,null]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import workspace  # noqa: E402  (also keeps bench/profile.py from shadowing the stdlib's profile)

MIB = 1 << 20
WORD = "bert.embeddings.word_embeddings"

FACTORY = '''"""BERT 4L-256 with random weights: input_ids int64[1, 32] -> last hidden state."""
import torch
import transformers


class LastHidden(torch.nn.Module):
    def __init__(self, bert: torch.nn.Module) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=input_ids).last_hidden_state


def bert():
    torch.manual_seed(0)
    config = transformers.BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                     intermediate_size=1024)
    ids = torch.randint(0, config.vocab_size, (1, 32), generator=torch.Generator().manual_seed(0))
    return LastHidden(transformers.BertModel(config)).eval(), (ids,)
'''

RUN_YAML = 'version: "1.0"\nsteps:\n- graph_quantize:\n  - scheme: W8-A8\nprofile:\n- GRAPH_QUANTIZE\n'


def _detail(bits: str, calibration: int) -> str:
    return (f"detail:\n  graph_quantize[0]:\n    calibration:\n      num_samples: {calibration}\n"
            f"    embedding:\n      bits: {bits}\n      group_size: 32\n")


def _run(root: Path, name: str, bits: str, calibration: int) -> tuple[dict, dict, float]:
    from np_optimizer import api

    record = api.experiments_create(steps="gq", project="bert", cwd=root, name=name)
    exp = Path(record.path)
    (exp / "run.yaml").write_text(RUN_YAML, encoding="utf-8")
    (exp / "run.detail.yaml").write_text(_detail(bits, calibration), encoding="utf-8")
    start = time.perf_counter()
    summary = api.run(experiment=str(exp))
    seconds = time.perf_counter() - start
    if summary.status != "success":
        raise SystemExit(f"np run of {name} ended {summary.status}: see {exp / 'logs' / 'execution.log'}")
    jobs = {p.parent.name: json.loads(p.read_text()) for p in sorted(exp.glob("[0-9][0-9]_*/job.json"))}
    layers = json.loads((exp / "01_graph_quantize" / "artifacts" / "layers_snr.json").read_text())["layers"]
    return jobs, {row["key"]: row for row in layers}, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", type=int, default=32, help="GQ calibration samples (np's default: 32)")
    parser.add_argument("--variants", default="8,4,null", help="embedding.bits values, comma-separated")
    args = parser.parse_args()
    from np_optimizer import api

    root = workspace()
    factory = root.parent / "bert_factory.py"
    factory.write_text(FACTORY, encoding="utf-8")
    api.projects_create(name="bert", model=f"{factory}:bert", device="raspberry_pi_5", cwd=root)
    print("BERT 4L-256 (vocab 30522, seq 32, random weights), np run GQ W8-A8 on raspberry_pi_5 (XNNPACK), "
          f"{args.calibration} calibration samples")
    rows, fp32 = [], None
    for bits in args.variants.split(","):
        jobs, layers, seconds = _run(root, f"embedding_{bits}", bits, args.calibration)
        fp32 = jobs["00_input_model"]["compile"]["pte_bytes"]
        gq = jobs["01_graph_quantize"]
        word = next((row for row in gq["changes"]["embedding"]["layers"] if row["module"] == WORD), {})
        rows.append((bits, gq, layers.get(WORD, {}), word, seconds))
    print(f"\nINPUT_MODEL (fp32) .pte: {fp32 / MIB:.2f} MiB")
    print(f"{'embedding.bits':<15} {'.pte MiB':>9} {'fp32/GQ':>8} {'SNR program':>12} {'SNR .pte':>9} "
          f"{'SNR word emb':>13} {'table SNR':>10} {'float left':>11} {'run s':>6}")
    ratios = {}
    for bits, gq, layer, word, seconds in rows:
        pte = gq["compile"]["pte_bytes"]
        ratios[bits] = fp32 / pte
        fidelity = gq["fidelity"]
        floats = gq["changes"]["float_weights"]
        print(f"{bits:<15} {pte / MIB:>9.2f} {fp32 / pte:>7.2f}x {fidelity['program']['snr_db']:>11.2f}  "
              f"{(fidelity.get('pte') or {}).get('snr_db', float('nan')):>8.2f} {layer.get('snr_db') or 0:>12.2f}  "
              f"{word.get('table_snr_db') or float('nan'):>9.2f} {floats['float_share_pct']:>10.1f}% {seconds:>6.0f}")
    for bits, gq, _layer, _word, _seconds in rows:
        left = gq["changes"]["float_weights"]["float_layers"]
        named = ", ".join(f"{e['module']} {e['elements']:,}" for e in left[:4]) or "none"
        output = gq["output"]
        print(f"  bits {bits}: checkpoint weight bytes {output['weight_bytes'] / MIB:.2f} MiB for "
              f"{output['params']:,} weights; matrices left float: {named}"
              + (f" and {len(left) - 4} more" if len(left) > 4 else ""))
    default = ratios.get("8")
    if default is not None:
        print(f"\nW8-A8 with the int8 embedding: {default:.2f}x smaller than fp32 (target >= 3x: "
              f"{'met' if default >= 3 else 'NOT met'}); without it: {ratios.get('null', float('nan')):.2f}x")
    return 0 if default is None or default >= 3 else 1


if __name__ == "__main__":
    raise SystemExit(main())
