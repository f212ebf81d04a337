"""Unpack the ExecuTorch 1.4.1 runtime (its pybindings, built without the event tracer) for the test of a device whose
runtime cannot trace: tests/profiler/measure/test_ssh_remote.py runs the measuring script with this folder first on
PYTHONPATH, so the real 1.4.1 runtime loads beside the venv's torch (the same 2.13.0+cpu it was built for).

    python scripts/old_runtime.py DEST      # `make venv` runs it with DEST = .venv/old-executorch

Only the four files the measuring script loads are kept (about 13 MB of the 17 MB wheel); the wheel comes from the
package registry with `pip download --no-deps`. Running it again when DEST is complete does nothing.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

VERSION = "1.4.1"
_KEEP = ("executorch/version.py", "executorch/extension/pybindings/_portable_lib.cpython-",
         "executorch/extension/pybindings/data_loader.cpython-", "executorch/backends/qualcomm/libqnn_executorch_backend.so")
_PACKAGES = ("executorch", "executorch/extension", "executorch/extension/pybindings")
MARKER = ".complete"


def unpack(dest: Path) -> Path:
    if (dest / MARKER).is_file():
        return dest
    with tempfile.TemporaryDirectory(prefix="np-old-runtime-") as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                               "--no-deps", "--only-binary=:all:", "-d", tmp, f"executorch=={VERSION}"],
                              capture_output=True, text=True)
        wheels = list(Path(tmp).glob("executorch-*.whl"))
        if proc.returncode or not wheels:
            sys.exit(f"error: could not download executorch=={VERSION}: {proc.stderr.strip()[-300:]}\n"
                     "hint: the package registry must be reachable (pip download executorch==1.4.1 --no-deps).")
        with zipfile.ZipFile(wheels[0]) as wheel:
            names = [n for n in wheel.namelist() if n.startswith(_KEEP)]
            if len(names) != len(_KEEP):
                sys.exit(f"error: the executorch {VERSION} wheel does not hold the expected runtime files: {names}")
            for name in names:
                wheel.extract(name, dest)
    for package in _PACKAGES:
        (dest / package / "__init__.py").touch()
    (dest / MARKER).write_text(f"executorch {VERSION}\n")
    return dest


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/old_runtime.py DEST")
    print(f"executorch {VERSION} runtime (no event tracer) in {unpack(Path(sys.argv[1]))}")
