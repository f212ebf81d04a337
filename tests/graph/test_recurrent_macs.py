"""MACs of recurrent layers (np_optimizer.graph.stats): real nn.LSTM / nn.GRU / nn.RNN modules exported with
torch.export (which keeps them as one aten.lstm.input / gru.input / rnn_tanh.input / rnn_relu.input node each),
counted against a hand count written from the layer's sizes, not from its weights:

    gates x (input width + hidden) x hidden x steps x batch, per layer and direction,

with gates LSTM 4, GRU 3, RNN 1, and a later layer's input width hidden x directions (LSTM with proj_size: the hidden
matmul takes the projection, and the projection is one more hidden x proj matmul per step).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from np_optimizer.graph.program_io import export_model
from np_optimizer.graph.stats import count_macs, count_params, recurrent_nodes

pytestmark = pytest.mark.filterwarnings("ignore:The tensor attributes:UserWarning")  # nn.RNN's _flat_weights

GATES = {nn.LSTM: 4, nn.GRU: 3, nn.RNN: 1}


def hand_count(kind: type[nn.Module], inp: int, hidden: int, *, steps: int, batch: int = 1, layers: int = 1,
               directions: int = 1, proj: int = 0) -> int:
    out = proj or hidden  # what a step's hidden matmul takes, and what the next layer gets per direction
    total = 0
    for layer in range(layers):
        width = inp if layer == 0 else out * directions
        per_step = GATES[kind] * (width + out) * hidden + proj * hidden
        total += per_step * directions
    return total * steps * batch


class Head(nn.Module):
    def __init__(self, rnn: nn.Module, outputs: int) -> None:
        super().__init__()
        self.rnn = rnn
        self.fc = nn.Linear(outputs, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.rnn(x)
        return self.fc(y)


CASES = [  # (id, module, input shape, hand count of the recurrent layer)
    ("lstm-20-32-10-steps", nn.LSTM(20, 32), (10, 1, 20), hand_count(nn.LSTM, 20, 32, steps=10)),
    ("lstm-2-layers-bidirectional-batch-first", nn.LSTM(12, 16, num_layers=2, bidirectional=True, batch_first=True),
     (3, 7, 12), hand_count(nn.LSTM, 12, 16, steps=7, batch=3, layers=2, directions=2)),
    ("lstm-proj", nn.LSTM(10, 24, proj_size=8, num_layers=2), (6, 2, 10),
     hand_count(nn.LSTM, 10, 24, steps=6, batch=2, layers=2, proj=8)),
    ("lstm-no-bias-unbatched", nn.LSTM(9, 11, bias=False), (5, 9), hand_count(nn.LSTM, 9, 11, steps=5)),
    ("gru-3-layers-batch-first", nn.GRU(16, 8, num_layers=3, batch_first=True), (2, 9, 16),
     hand_count(nn.GRU, 16, 8, steps=9, batch=2, layers=3)),
    ("gru-bidirectional", nn.GRU(6, 10, bidirectional=True), (4, 3, 6),
     hand_count(nn.GRU, 6, 10, steps=4, batch=3, directions=2)),
    ("rnn-tanh", nn.RNN(7, 13, num_layers=2), (8, 1, 7), hand_count(nn.RNN, 7, 13, steps=8, layers=2)),
    ("rnn-relu-bidirectional-batch-first", nn.RNN(5, 4, nonlinearity="relu", bidirectional=True, batch_first=True),
     (2, 6, 5), hand_count(nn.RNN, 5, 4, steps=6, batch=2, directions=2)),
]


@pytest.mark.parametrize("module, shape, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_recurrent_layer_macs_match_the_hand_count(module: nn.Module, shape: tuple[int, ...], expected: int) -> None:
    torch.manual_seed(0)
    outputs = module.hidden_size * (2 if module.bidirectional else 1)
    if isinstance(module, nn.LSTM) and module.proj_size:
        outputs = module.proj_size * (2 if module.bidirectional else 1)
    model = Head(module, outputs)
    program = export_model(model, (torch.randn(*shape),))
    total, per_node = count_macs(program)
    ops = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
    op = {nn.LSTM: "lstm", nn.GRU: "gru", nn.RNN: f"rnn_{module.nonlinearity}" if isinstance(module, nn.RNN)
          else ""}[type(module)]
    assert f"aten.{op}.input" in ops  # torch.export keeps the layer as one node: the case this counts
    assert per_node[op] == expected
    rows = 1
    for dim in shape[:-1]:
        rows *= dim
    assert total == expected + rows * outputs * 5  # the Linear head: batch x steps x outputs x 5
    (node,) = recurrent_nodes(program)
    assert node["macs"] == expected and node["op"] == op
    assert node["params"] == sum(p.numel() for p in module.parameters()) == node["params_float"]
    assert count_params(program) == sum(p.numel() for p in model.parameters())


def test_the_user_model_conv_two_layer_lstm_gru_over_49_steps() -> None:
    """Issue 27's model: Conv1d(40, 64, 3) over 49 steps, LSTM(64, 128, 2 layers), GRU(128, 64), Linear(64, 12): np
    once counted its conv and linear only (377,088 MACs)."""

    class Kws(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv1d(40, 64, 3, padding=1)
            self.lstm = nn.LSTM(64, 128, num_layers=2, batch_first=True)
            self.gru = nn.GRU(128, 64, batch_first=True)
            self.fc = nn.Linear(64, 12)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.conv(x)).transpose(1, 2)
            y, _ = self.lstm(y)
            y, _ = self.gru(y)
            return self.fc(y[:, -1])

    program = export_model(Kws(), (torch.randn(1, 40, 49),))
    total, per_node = count_macs(program)
    lstm = hand_count(nn.LSTM, 64, 128, steps=49, layers=2)
    gru = hand_count(nn.GRU, 128, 64, steps=49)
    assert (lstm, gru) == (4 * (64 + 128) * 128 * 49 + 4 * (128 + 128) * 128 * 49, 3 * (128 + 64) * 64 * 49)
    assert per_node == {"conv1d": 64 * 40 * 3 * 49, "lstm": lstm, "gru": gru, "linear": 64 * 12}
    assert total - lstm - gru == 377_088 and total == 13_422_848


def test_a_packed_sequence_lstm_data_counts_the_rows_of_its_data() -> None:
    """aten.lstm.data (a PackedSequence) does not survive torch.export (its batch sizes are data), so the node is
    built by hand: its rows are the packed data's first dim, the sum of the batch sizes."""
    graph = torch.fx.Graph()
    lstm = nn.LSTM(8, 16)
    data = graph.placeholder("data")
    data.meta["val"] = torch.empty(8, 8)  # batch sizes [2, 2, 2, 1, 1]
    sizes = graph.placeholder("batch_sizes")
    sizes.meta["val"] = torch.tensor([2, 2, 2, 1, 1])
    params = []
    for name, value in lstm.named_parameters():
        params.append(graph.placeholder(name))
        params[-1].meta["val"] = value.detach()
    node = graph.call_function(torch.ops.aten.lstm.data, (data, sizes, [], params, True, 1, 0.0, False, False))
    node.meta["val"] = (torch.empty(8, 16), torch.empty(1, 2, 16), torch.empty(1, 2, 16))
    total, per_node = count_macs(SimpleNamespace(graph=graph))  # type: ignore[arg-type]
    assert total == per_node[node.name] == 8 * 4 * (8 + 16) * 16
