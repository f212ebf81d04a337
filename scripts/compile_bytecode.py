"""Compile the virtual environment's Python files to bytecode on every core, once, at setup.

pip compiles what it installs one file at a time (about 55 of the 90 s a fresh `make venv` took here); `make venv`
installs with --no-compile and runs this instead. Without .pyc files every np process would compile torch's modules
again at each start, since this machine's shells set PYTHONDONTWRITEBYTECODE.

Only what np, its tests and its setup import is compiled: a fresh clone's `make test` read 6,755 of the 23,784
modules site-packages holds (counted from the .pyc files' access times). `SKIP` names the trees none of it reads
(dependencies' own tests and examples, the Hugging Face model families np's tests do not build, ExecuTorch backends
and Ray libraries np does not use): about half the files, and half the time. A module there still imports, compiled
from source as Python does without a .pyc. A file that does not compile (a dependency's Python 2 test data) is left as
pip leaves it; the count is printed.
"""

import compileall
import re
import sys
import sysconfig
import time
from pathlib import Path

_HF_USED = "auto|bert|encoder_decoder|llama|mobilenet_v2|qwen2|resnet|vit"  # the families tests/ build
SKIP = re.compile(
    r"/(tests?|examples)/"
    r"|/site-packages/(coremltools|mypyc|hypothesis|hydra|setuptools|sympy/physics)/"
    r"|/site-packages/ray/(rllib|data|train|tune|llm|serve|air)/"
    r"|/site-packages/executorch/backends/(nxp|qualcomm|mlx|samsung|cadence|webgpu|vulkan|apple|cuda|mediatek|openvino"
    r"|xnnpack/third-party)/"
    rf"|/site-packages/transformers/models/(?!({_HF_USED})/)[^/]+/"
)
KEEP = re.compile(r"/site-packages/executorch/examples/models/")  # np's zoo imports ExecuTorch's example models


class _Skip:
    """compileall's `rx`: a truthy search() skips the file."""

    @staticmethod
    def search(path: str) -> bool:
        path = path.replace("\\", "/")
        return bool(SKIP.search(path)) and not KEEP.search(path)


start = time.perf_counter()
site = Path(sysconfig.get_paths()["purelib"])
ok = compileall.compile_dir(site, quiet=2, workers=0, rx=_Skip)  # workers=0: one per core
print(f"bytecode compiled in {site} in {time.perf_counter() - start:.0f} s (the trees np never imports left out)"
      + ("" if ok else " (some files do not compile, as with pip: left as they are)"))
sys.exit(0)
