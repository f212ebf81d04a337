"""What np relies on in ExecuTorch's private API (adapters/executorch_private.py), pinned on the installed ExecuTorch
with a tiny model lowered to XNNPACK: an upgrade that moves or changes one of these fails here first."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from np_optimizer.adapters import executorch_private as ep


class _Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(self.linear(x), min=0.0)  # a clamp with no upper bound: flatc writes `inf`


@pytest.fixture(scope="module")
def lowered() -> Any:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    program = torch.export.export(_Small().eval(), (torch.randn(2, 4),))
    return to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])


def test_a_pte_deserializes_to_its_delegates(lowered: Any, tmp_path: Path) -> None:
    pte = lowered.to_executorch().buffer
    program = ep.deserialize_pte(pte)
    assert [d.id for d in program.execution_plan[0].delegates] == ["XnnpackBackend"]
    from np_optimizer.adapters.executorch_runtime import pte_backends

    (tmp_path / "model.pte").write_bytes(pte)
    assert pte_backends(tmp_path / "model.pte") == ["XnnpackBackend"]  # the runtime's "needs backend(s)" message


def test_an_xnnpack_blob_decodes_to_its_nodes_in_run_order(lowered: Any) -> None:
    from executorch.exir.lowered_backend_module import get_lowered_submodules

    graph_module = lowered.exported_program().graph_module
    blobs = [bytes(module.processed_bytes) for _name, module, _node in get_lowered_submodules(graph_module)]
    assert len(blobs) == 1
    graph = ep.xnnpack_graph_json(blobs[0])
    nodes = graph["xnodes"]
    assert [n["xnode_union_type"] for n in nodes] == ["XNNFullyConnected", "XNNClamp"]  # the runtime's order
    fc, clamp = (n["xnode_union"] for n in nodes)
    assert (fc["input1_id"], fc["output_id"]) == (0, 3) and clamp["input_id"] == fc["output_id"]  # tensor ids
    assert [n["debug_handle"] for n in nodes] == [1, 2]  # np maps them back to the graph's nodes
    bounds = nodes[1]["output_min_max"]
    assert bounds["output_min"] == 0.0 and math.isinf(bounds["output_max"])  # flatc's bare `inf`, read as infinity

    from np_optimizer.backends.xnnpack import xnnpack_delegate_ops

    ops = xnnpack_delegate_ops(blobs[0])
    assert ops[1] == {"type": "XNNClamp", "handle": 2, "inputs": [3], "output": 4}


def test_quantized_embedding_ops_and_the_experimental_warning() -> None:
    ep.register_quantized_ops()
    assert hasattr(torch.ops.quantized_decomposed, "embedding_byte")
    assert hasattr(torch.ops.quantized_decomposed, "embedding_4bit")
    category = ep.experimental_warning()
    assert issubclass(category, Warning)
    with warnings.catch_warnings():
        warnings.simplefilter("error", category)
        with pytest.raises(category):
            warnings.warn("x", category, stacklevel=1)


def test_int4_embedding_packing_and_the_unchecked_edge_config() -> None:
    table = torch.tensor([[1, 2, -8, 7]], dtype=torch.int8)
    packed = ep.pack_embedding_weight(table, 4)  # shifted by 8 into 0..15, two to a byte, the first high
    assert packed.dtype == torch.uint8 and packed.tolist() == [[(9 << 4) | 10, (0 << 4) | 15]]
    config = ep.edge_config_unchecked()
    from executorch.exir import EdgeCompileConfig

    assert isinstance(config, EdgeCompileConfig) and config._check_ir_validity is False


def test_an_edge_op_unwraps_to_its_aten_overload(lowered: Any) -> None:
    from executorch.exir.dialects._ops import ops as exir_ops

    assert ep.edge_op_overload(exir_ops.edge.aten.linear.default) is torch.ops.aten.linear.default
    assert ep.edge_op_overload(len) is len


class _TwoLayers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x)))


@pytest.mark.heavy
def test_arm_partition_hooks_see_each_partitions_tag_folder_and_tosa_and_its_specs_are_rewritten(
        tmp_path: Path) -> None:
    """One Arm lowering (a few seconds) for both: the hooks around it, then its delegate's compile specs rewritten
    before to_executorch, which stores them in the .pte."""
    from executorch.backends.arm import EthosUPartitioner
    from executorch.backends.arm.common.arm_compile_spec import ArmCompileSpec
    from executorch.backends.arm.ethosu import EthosUCompileSpec
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    from np_optimizer.quantize.pt2e import quantize_program

    torch.manual_seed(0)
    example = (torch.randn(1, 8),)
    program = quantize_program(torch.export.export(_TwoLayers().eval(), example), backend="ethos-u", scheme="W8-A8",
                               target="ethos-u55-128", calibration=[example])
    spec = EthosUCompileSpec("ethos-u55-128")
    spec.dump_intermediate_artifacts_to(str(tmp_path))
    spec.dump_debug_info(ArmCompileSpec.DebugMode.JSON)
    seen: list[tuple[str, Any]] = []

    def after_tosa(folder: str | None) -> None:
        seen.append(("after_tosa", folder))
        assert folder is not None and (Path(folder) / "debug.json").is_file()  # this partition's, before the next

    with ep.arm_partition_hooks(lambda tag: seen.append(("before_tosa", tag)), after_tosa,
                                lambda tosa: seen.append(("before_vela", len(tosa)))):
        lowered = to_edge_transform_and_lower(program, partitioner=[EthosUPartitioner(spec)],
                                              compile_config=EdgeCompileConfig(_check_ir_validity=False))
    assert [kind for kind, _ in seen] == ["before_tosa", "after_tosa", "before_vela"]
    assert seen[0][1] == "tag0" and seen[1][1] == str(tmp_path) and seen[2][1] > 0
    assert "executorch_call_delegate" in str(lowered.exported_program().graph_module.code)
    from executorch.backends.arm.ethosu.backend import EthosUBackend
    from executorch.backends.arm.tosa.backend import TOSABackend

    assert TOSABackend._preprocess.__name__ != "tosa" and EthosUBackend._compile_tosa_flatbuffer.__name__ != "vela"

    assert ep.rewrite_compile_specs(lowered, lambda key, value: None if key == "dump_debug_info" else
                                    value.replace(str(tmp_path).encode(), b"here")) == 1
    specs = {s.key: bytes(s.value) for d in ep.deserialize_pte(lowered.to_executorch().buffer).execution_plan[0].delegates
             for s in d.compile_specs}
    assert "dump_debug_info" not in specs and specs["debug_artifact_path"] == b"here"  # dropped; rewritten
    assert specs["output_format"] == b"vela"  # left as it was


def test_partition_rejects_takes_both_reporters_calls_for_the_block_only() -> None:
    """The Arm checks' WhyNoPartitionReporter and XNNPACK's WhyNoPartition, called on a real graph's nodes: the first
    reason per call_function node is kept (placeholders are not work), the originals still run, and both classes are
    as they were after the block."""
    import logging

    from executorch.exir.backend.utils import WhyNoPartition, WhyNoPartitionReporter

    graph = torch.fx.symbolic_trace(_Small()).graph
    by_op = {n.op: n for n in graph.nodes}
    placeholder, linear, clamp = by_op["placeholder"], by_op["call_module"], by_op["call_function"]
    reporter = WhyNoPartitionReporter()
    with ep.partition_rejects() as found:
        reporter.report_reject(clamp, "Clamp needs  int8,\n got float")
        reporter.report_reject(clamp, "a second reason")
        reporter.report_reject(placeholder, "not work")
        WhyNoPartition(logger=logging.getLogger("np.test"))(linear, "not a call_function either")
    assert found == {clamp.name: "Clamp needs int8, got float"}  # whitespace folded: one line per reason
    assert "Clamp needs" in reporter.get_table_report()  # the reporter's own table still has it
    assert WhyNoPartitionReporter.report_reject.__name__ == "report_reject" and \
        WhyNoPartition.__call__.__name__ == "__call__"


def test_the_unchecked_edge_config_lowers_to_the_same_bytes() -> None:
    """The edge IR check only raises: XNNPACK lowers a program to the same .pte with it (the default config) and
    without it (edge_config_unchecked, as np lowers), and the unchecked config is the default one but for the check."""
    import copy

    from executorch.backends.xnnpack import get_xnnpack_edge_compile_config
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    torch.manual_seed(0)
    program = torch.export.export(_Small().eval(), (torch.randn(2, 4),))

    def pte(config: Any) -> bytes:
        lowered = to_edge_transform_and_lower(copy.deepcopy(program), partitioner=[XnnpackPartitioner()],
                                              compile_config=config)
        return bytes(lowered.to_executorch().buffer)

    assert pte(None) == pte(ep.edge_config_unchecked())
    unchecked, default = vars(ep.edge_config_unchecked()), vars(EdgeCompileConfig())
    assert {k for k in default if unchecked[k] != default[k]} == {"_check_ir_validity"}
    assert vars(get_xnnpack_edge_compile_config()) == unchecked  # XNNPACK's own recipe lowers the same way
