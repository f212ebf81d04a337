"""Fail setup with a clear message when the installed torch is not the CPU build np is pinned to."""

import sys

import torch

if not torch.__version__.endswith("+cpu"):
    sys.exit(
        f"error: torch {torch.__version__} is installed, but np needs the CPU build (2.13.0+cpu).\n"
        "hint: remove .venv and run `make test` again; pip takes torch==2.13.0+cpu from the machine's wheel folder."
    )
print(f"environment ok: torch {torch.__version__}")
