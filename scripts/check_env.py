"""Fail setup with a clear message when the installed torch is not the CPU build np is pinned to, or when the one
dependency installed apart (MLIA's float .pt2 converter, see pyproject.toml) is missing."""

import importlib.metadata
import importlib.util
import sys

import torch

if not torch.__version__.endswith("+cpu"):
    sys.exit(
        f"error: torch {torch.__version__} is installed, but np needs the CPU build (2.13.0+cpu).\n"
        "hint: remove .venv and run `make test` again; pip takes torch==2.13.0+cpu from the machine's wheel folder."
    )
if importlib.util.find_spec("mlia.backend.mlia_pytorch_to_tosa_converter") is None:
    sys.exit("error: mlia-converters-pytorch is not installed (MLIA's float .pt2 path).\n"
             "hint: run `make venv` again; it installs it with --no-deps.")
print(f"environment ok: torch {torch.__version__}, executorch {importlib.metadata.version('executorch')}")
