"""Run a .pte with this machine's ExecuTorch runtime (XNNPACK and portable kernels; no NPU backends)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from np_optimizer.errors import ToolError

__all__ = ["run_pte", "run_pte_on", "pte_backends", "pte_method"]


def pte_backends(pte_path: Path) -> list[str]:
    """Backend ids of the delegates in a .pte's first execution plan, e.g. ['XnnpackBackend']."""
    from np_optimizer.adapters.executorch_private import deserialize_pte

    program = deserialize_pte(Path(pte_path).read_bytes())
    return [d.id for d in program.execution_plan[0].delegates]


def _runtime() -> Any:
    """The pybindings runtime with ExecuTorch's quantized kernels registered: importing `executorch.kernels.quantized`
    loads them into the runtime of this process (q/dq left outside a delegate, `embedding_byte`, `embedding_4bit`);
    the pybindings module alone has the portable and optimized kernels only ("Missing operator" at load)."""
    import executorch.kernels.quantized  # noqa: F401
    from executorch.runtime import Runtime

    return Runtime.get()


def run_pte(pte_path: Path, inputs: tuple[Any, ...]) -> list[Any]:
    return run_pte_on(pte_path, [inputs])[0]


def run_pte_on(pte_path: Path, samples: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
    """The .pte's outputs on each sample, the program loaded once (a load packs every weight again)."""
    runtime = _runtime()
    try:
        program = runtime.load_program(Path(pte_path))
        method = program.load_method("forward")
    except RuntimeError as exc:
        registered = set(runtime.backend_registry.registered_backend_names)
        missing = sorted(set(pte_backends(pte_path)) - registered)
        reason = f"needs backend(s) {', '.join(missing)}, which this runtime lacks" if missing else str(exc)
        raise ToolError(f"Cannot load {pte_path.name} on this machine: {reason}.",
                        hint="Only XNNPACK and portable-kernel programs run here.", code="NP-RUN-500") from exc
    if method is None:
        raise ToolError(f"{pte_path.name} has no 'forward' method.", hint="Recompile the checkpoint.", code="NP-RUN-500")
    return [list(method.execute(list(inputs))) for inputs in samples]


def pte_method(pte_path: Path) -> Any:
    """The loaded `forward` method of a .pte, to execute many inputs without loading the program each time."""
    runtime = _runtime()
    try:
        method = runtime.load_program(Path(pte_path)).load_method("forward")
    except RuntimeError as exc:
        raise ToolError(f"Cannot load {pte_path.name} on this machine: {exc}.",
                        hint="Only XNNPACK and portable-kernel programs run here.", code="NP-RUN-500") from exc
    if method is None:
        raise ToolError(f"{pte_path.name} has no 'forward' method.", hint="Recompile the checkpoint.", code="NP-RUN-500")
    return method
