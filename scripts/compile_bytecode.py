"""Compile the virtual environment's Python files to bytecode on every core, once, at setup.

pip compiles what it installs one file at a time (about 55 of the 90 s a fresh `make venv` took here); `make venv`
installs with --no-compile and runs this instead. Without .pyc files every np process would compile torch's modules
again at each start, since this machine's shells set PYTHONDONTWRITEBYTECODE. A file that does not compile (a
dependency's Python 2 test data) is left as pip leaves it; the count is printed.
"""

import compileall
import sys
import sysconfig
import time
from pathlib import Path

start = time.perf_counter()
site = Path(sysconfig.get_paths()["purelib"])
ok = compileall.compile_dir(site, quiet=2, workers=0)  # workers=0: one per core
print(f"bytecode compiled in {site} in {time.perf_counter() - start:.0f} s"
      + ("" if ok else " (some files do not compile, as with pip: left as they are)"))
sys.exit(0)
