"""A checkpoint np wrote loads again in a fresh process (np profile, np report --layers and a retried run load the
.pt2 files of earlier steps): here a program the Arm quantizer prepared, which holds ExecuTorch's dim-order copy of an
integer input (the masks of Hugging Face encoders)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

LOAD = "import sys; from pathlib import Path; from np_optimizer.graph.program_io import load_program; " \
       "p = load_program(Path(sys.argv[1])); print(sum(1 for n in p.graph.nodes if 'dim_order' in str(n.target)))"


class MaskedEmbedding(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(16, 8)
        self.linear = nn.Linear(8, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = (ids > 0).to(torch.float32).unsqueeze(-1)
        return self.linear(self.table(ids) * mask)


@pytest.mark.heavy
def test_an_ethos_u_quantized_program_with_a_dim_order_copy_loads_in_a_fresh_process(tmp_path: Path) -> None:
    from np_optimizer.devices import get_device
    from np_optimizer.graph.program_io import export_model, save_program
    from np_optimizer.quantize.pt2e import quantize_program

    torch.manual_seed(0)
    ids = torch.randint(0, 16, (1, 6))
    device = get_device("alif_e8")
    program = quantize_program(export_model(MaskedEmbedding().eval(), (ids,)), backend=device.backend,
                               scheme="W8-A8", target=device.mlia_target, calibration=[(ids,)])
    path = tmp_path / "model.pt2"
    save_program(program, path)
    loaded = subprocess.run([sys.executable, "-c", LOAD, str(path)], capture_output=True, text=True, timeout=300)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert int(loaded.stdout.strip().splitlines()[-1]) >= 1  # the op this is about is there
