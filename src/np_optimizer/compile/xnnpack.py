"""Lower an exported program to an XNNPACK-delegated ExecuTorch .pte."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.compile.stats import delegation_stats, planned_arena_bytes

if TYPE_CHECKING:
    from torch.export import ExportedProgram

__all__ = ["lower_xnnpack"]


def register_quantized_out_variants() -> None:
    """ExecuTorch's out-variant kernels of quantized_decomposed::* ops, needed by to_executorch() for q/dq nodes left
    outside a delegate. Importing a quantizer registers them as a side effect; a process that only loads a .pt2 must
    import them itself ("Missing out variants" otherwise)."""
    import executorch.kernels.quantized  # noqa: F401


def lower_xnnpack(program: ExportedProgram, out_dir: Path) -> dict[str, Any]:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    register_quantized_out_variants()
    edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
    stats = delegation_stats(edge.exported_program())
    executorch_program = edge.to_executorch()
    pte = out_dir / "model.pte"
    pte.write_bytes(executorch_program.buffer)
    reason = None
    if stats["num_delegates"] == 0:
        reason = "XNNPACK delegated no operator; the .pte runs on portable CPU kernels only"
    return {"pte_file": pte.name, **stats, "planned_arena_bytes": planned_arena_bytes(executorch_program),
            "reason": reason, "status": "ok"}
