"""A workspace whose path has a space compiles for Ethos-U (Vela cannot take such paths: np keeps them away from it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import make_project, run_here

pytestmark = pytest.mark.np_run  # every test here runs np run, itself or through a module fixture


def test_ethos_u_compile_in_a_folder_with_a_space(tmp_path: Path) -> None:
    from np_optimizer import api

    root = tmp_path / "my models" / "ws"
    api.workspace_init(root)
    exp = make_project(root, "npu_space", device="alif_e8",
                       run_yaml='version: "1.0"\nsteps:\n- graph_quantize:\n  - scheme: W8-A8\n')
    with pytest.MonkeyPatch.context() as env:  # in this process: the paths, not the interpreter, are under test
        env.setenv("NP_CACHE_DIR", str(tmp_path / "cache"))
        run_here(exp)
    job = json.loads((exp / "01_graph_quantize" / "job.json").read_text())
    assert job["compile"]["status"] == "ok" and job["compile"]["num_delegates"] >= 1, job["compile"]
    compiled = exp / "01_graph_quantize" / "artifacts" / "compiled_alif_e8"
    assert list((compiled / "ethos_u").glob("output_tag*.tosa")), "the TOSA artifacts come back into the job"
    assert json.loads((exp / "meta.json").read_text())["status"] == "success"
