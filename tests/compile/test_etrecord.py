"""The ETRecord is made when asked for (np export --level inspect), not at every compile: the compile folder holds
none, and the one exported is lowered again from the checkpoint and belongs to the very .pte that was compiled (and
measured), so ExecuTorch's Inspector can read it."""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import FinishedRun


def test_inspect_export_makes_the_etrecord_of_the_compiled_pte(mlp_pi_run: FinishedRun, tmp_path: Path) -> None:
    from executorch.devtools.etrecord import parse_etrecord

    from np_optimizer import api

    exp = mlp_pi_run.experiment
    compiled = exp / "02_graph_quantize" / "artifacts" / "compiled_raspberry_pi_5"
    assert (compiled / "layers_trace.json").is_file()  # what np's per-layer host times read
    assert not (compiled / "model.etrecord").exists()  # the compile made no ETRecord
    record = api.export(level="inspect", output=tmp_path / "inspect", cwd=exp)
    # estimated by MLIA only: no traced round, so no ETDump beside them
    assert [Path(f).name for f in record.files] == ["model.pte", "model.etrecord"]
    assert (tmp_path / "inspect" / "model.pte").read_bytes() == (compiled / "model.pte").read_bytes()
    etrecord = parse_etrecord(str(tmp_path / "inspect" / "model.etrecord"))
    assert etrecord.edge_dialect_program is not None and etrecord._debug_handle_map
    assert not list((tmp_path / "inspect").glob(".*"))  # no temporary file left
    # its nodes' stack traces name no folder of this machine (the model's source, torch's modules, the workspace)
    stored = b"".join(zipfile.ZipFile(tmp_path / "inspect" / "model.etrecord").read(n) for n in
                      zipfile.ZipFile(tmp_path / "inspect" / "model.etrecord").namelist())
    assert b"torch/nn/modules/linear.py" in stored  # the traces are kept, by their path inside site-packages
    import np_optimizer

    machine = {sys.prefix, os.path.realpath(sys.prefix), str(Path(np_optimizer.__file__).parents[1]),
               str(exp.parent.parent), os.path.expanduser("~")}
    assert not [m for m in machine if len(m) > 1 and m.encode() in stored]


def test_an_etrecord_of_another_pte_or_an_npu_is_refused(mlp_pi_run: FinishedRun, tmp_path: Path) -> None:
    from np_optimizer.compile.etrecord import write_etrecord
    from np_optimizer.devices import get_device
    from np_optimizer.errors import CompileError, UnsupportedError

    program = mlp_pi_run.experiment / "02_graph_quantize" / "artifacts" / "model.pt2"
    with pytest.raises(CompileError, match="another .pte"):
        write_etrecord(program, get_device("raspberry_pi_5"), "0" * 64, tmp_path / "model.etrecord")
    with pytest.raises(UnsupportedError, match="no ETRecord for alif_e8"):
        write_etrecord(program, get_device("alif_e8"), "0" * 64, tmp_path / "model.etrecord")
    assert not list(tmp_path.iterdir())  # nothing written
