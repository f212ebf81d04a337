"""The handover records: a job's statistics reach the profiler only for the exact checkpoint they were counted on."""

from __future__ import annotations

from pathlib import Path

from np_optimizer.records import CheckpointRef, CompileResult
from np_optimizer.records.compiled import CompiledCheckpoint, ProgramStats
from np_optimizer.records.parts import JobOutput

SHA = "a" * 64


def test_statistics_of_another_checkpoint_are_not_handed_over() -> None:
    output = JobOutput("INPUT_MODEL", "artifacts/model.pt2", SHA, macs=84_480, params=85_002, nodes=16)
    assert ProgramStats.of_output(output, SHA).as_dict() == {"macs": 84_480, "params": 85_002}
    assert ProgramStats.of_output(output, "b" * 64) == ProgramStats()  # a .pt2 made again since: counted anew
    assert ProgramStats.of_output(None, SHA).as_dict() == {}


def test_a_compiled_checkpoint_names_its_files_key_and_delegation(tmp_path: Path) -> None:
    record = CompileResult(device="host", backend="xnnpack", target=None, status="ok", program_sha256=SHA,
                           compile_key="k" * 64, pte_file="model.pte", pte_sha256="p" * 64, num_delegates=1,
                           delegated_ops=5, non_delegated_ops=2)
    compiled = CompiledCheckpoint(CheckpointRef("INPUT_MODEL", "00_input_model", tmp_path / "model.pt2", SHA),
                                  tmp_path / "compiled_host", record)
    assert compiled.pte_path == tmp_path / "compiled_host" / "model.pte"
    assert (compiled.compile_key, compiled.pte_sha256, compiled.delegation) == ("k" * 64, "p" * 64, (5, 7, 1))
    assert CompiledCheckpoint(compiled.checkpoint, compiled.folder, CompileResult(
        device="host", backend="xnnpack", target=None, status="failed", program_sha256=SHA,
        compile_key="k" * 64)).pte_path is None  # a failed lowering wrote no .pte
