"""The command line: its options, checked, as one typed record; and the document's "config" section."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import NoReturn, Optional, Sequence, Tuple

from .protocol import Json, MeasureError

DESCRIPTION = "Measure an ExecuTorch .pte on this machine and print ONE JSON document on stdout."
WORKER_FLAG = "--_worker"  # the supervisor starts the worker with the same arguments plus this one


@dataclass(frozen=True)
class Options:
    pte: str
    warmup: int
    runs: int
    timeout: float
    threads: Optional[int]
    method: str
    input_spec: Optional[str]
    seed: int
    int_range: Tuple[int, int]
    inputs: Optional[str]
    no_guard: bool
    kill_grace: float
    load_timeout: float
    pretty: bool
    worker: bool
    zygote: Optional[str] = None  # np's warm measuring process (zygote.py), when it started one
    trace_runs: int = 0  # traced runs after the timed ones (ETDump, per-layer times); 0: none


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # a usage error is a document too, not argparse's exit 2 and text
        raise MeasureError("usage", message)


def _int_range(text: str) -> Tuple[int, int]:
    lo, _, hi = text.partition(":")
    return (int(lo), int(hi))


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(description=DESCRIPTION)
    p.add_argument("pte", help="the .pte file")
    p.add_argument("--warmup", type=int, default=3, help="warm-up calls, not timed into samples (3)")
    p.add_argument("--runs", type=int, default=30, help="timed calls (30)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds for warm-up + runs; load excluded (60)")
    p.add_argument("--threads", type=int, default=None, help="runtime thread pool size (default: the runtime's)")
    p.add_argument("--method", default="forward")
    p.add_argument("--input-spec", default=None, help="e.g. 1x3x224x224:float32,1x8:int64 (default: from the .pte)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated inputs (0)")
    p.add_argument("--int-range", type=_int_range, default=(0, 10),
                   help="LO:HI of generated integer inputs (0:10)")
    p.add_argument("--inputs", default=None, help=".pt (tensor or list of tensors), .npy or .npz file")
    p.add_argument("--no-guard", action="store_true", help="one process: no supervisor (a hung call hangs)")
    p.add_argument("--kill-grace", type=float, default=10.0,
                   help="supervisor: seconds past the timeout before a hung call is killed")
    p.add_argument("--load-timeout", type=float, default=600.0, help="supervisor: seconds allowed for imports + load")
    p.add_argument("--trace-runs", type=int, default=0,
                   help="after the timed runs, this many runs with the event tracer on (ETDump in the document; 0)")
    p.add_argument("--pretty", action="store_true", help="indent the JSON document")
    p.add_argument(WORKER_FLAG, dest="worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--zygote", default=None, help=argparse.SUPPRESS)
    return p


def parse_options(argv: Sequence[str]) -> Options:
    """The options of `argv`; raises MeasureError("usage") for anything wrong, before any heavy import."""
    a = build_parser().parse_args(list(argv))
    if a.warmup < 0 or a.runs < 1 or a.timeout <= 0:
        raise MeasureError("usage", "need --warmup >= 0, --runs >= 1, --timeout > 0")
    if a.trace_runs < 0:
        raise MeasureError("usage", "--trace-runs must be >= 0")
    if a.threads is not None and a.threads < 1:
        raise MeasureError("usage", "--threads must be >= 1")
    return Options(pte=a.pte, warmup=a.warmup, runs=a.runs, timeout=a.timeout, threads=a.threads, method=a.method,
                   input_spec=a.input_spec, seed=a.seed, int_range=a.int_range, inputs=a.inputs, no_guard=a.no_guard,
                   kill_grace=a.kill_grace, load_timeout=a.load_timeout, pretty=a.pretty, worker=a.worker,
                   zygote=a.zygote, trace_runs=a.trace_runs)


def config_section(o: Options) -> Json:
    """The document's "config" section: what was asked."""
    return {"warmup": o.warmup, "runs": o.runs, "timeout_s": o.timeout, "threads": o.threads,
            "method": o.method, "seed": o.seed, "input_spec": o.input_spec, "inputs_file": o.inputs,
            "int_range": list(o.int_range), "guard": not o.no_guard, "trace_runs": o.trace_runs}
