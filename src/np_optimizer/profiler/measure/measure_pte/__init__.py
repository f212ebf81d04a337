"""measure_pte: run the ExecuTorch runtime on a compiled .pte in a fresh process and print one JSON document.

Shipped as it is to devices that have a Python with torch and the ExecuTorch runtime but nothing of np (one zipapp,
built by np_optimizer.profiler.measure.script_archive). So: standard library only at import time (torch and
executorch are imported inside the worker's functions), relative imports only, Python >= 3.8.

    __main__.py    command line entry: parse, choose the process layout             (usage: see its docstring)
    options.py     the options as one typed record, the document's "config" section
    supervisor.py  the parent process: runs the worker, enforces load timeout, timeout + kill grace, signals
    parent.py      dying with the requester: death signals (prctl) and the reparenting check
    zygote.py      np's warm start on this machine: imports once, forks a fresh worker per measurement
    worker.py      the measuring process: model file, imports, inputs, load, runs, in order, as events
    load.py        import torch + the runtime, thread pool, load program and method, classify load errors
    inputs.py      inputs from a file, --input-spec or the execution plan; checked against the method
    timing.py      warm-up and timed runs under the timeout
    memory.py      VmRSS / VmHWM figures from /proc, the high-water mark reset through clear_refs
    pte.py         the .pte's flatbuffer read without torch (plans, delegates, planned memory)
    host.py        the "host" section (CPU model, cores, governor, load)
    protocol.py    error kinds and exit codes (EXIT), JSON-lines events (Emitter), printing the document
    document.py    the one document assembled from the events
"""

from .protocol import EXIT, SCHEMA
from .pte import read_pte_info

__all__ = ["EXIT", "SCHEMA", "read_pte_info"]
