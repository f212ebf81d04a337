"""layers/numerics.py's tap on a quantized checkpoint: what is the same for every input is computed once, and the
values are those of the program run plainly."""

from __future__ import annotations

import pytest

from tests.helpers import FinishedRun


@pytest.mark.np_run  # reads conftest's mlp_pi_run: a full np run in a subprocess
def test_a_quantized_programs_weight_dequantize_is_computed_once_with_the_same_values(mlp_pi_run: FinishedRun) -> None:
    import torch

    from np_optimizer.graph.program_io import load_program
    from np_optimizer.layers import numerics

    program = load_program(mlp_pi_run.experiment / "02_graph_quantize" / "artifacts" / "model.pt2")
    gm = program.module()
    constant = numerics._constant_nodes(gm)
    weights = [n for n in gm.graph.nodes if "dequantize_per_channel" in str(n.target)]
    assert weights and all(n.name in constant for n in weights)  # each weight's dequantize: once per tap
    readers = [n for n in gm.graph.nodes if any(a.op == "placeholder" for a in n.all_input_nodes)]
    assert readers and not any(n.name in constant for n in readers)  # nothing that reads the input
    torch.manual_seed(0)
    example = next(p for p in gm.graph.nodes if p.op == "placeholder").meta["val"]
    samples = [(torch.randn(example.shape),) for _ in range(3)]
    taps = numerics.tap(program, samples)
    with torch.no_grad():
        plain = [gm(*x) for x in samples]
    assert taps.error is None and taps.values
    assert all(torch.equal(a, b) for a, b in zip(taps.outputs, plain))
