"""graph_quantize's `sensitivity:`: for each weighted layer and each candidate format, the output SNR the model loses
when that layer alone takes the base format instead, and the layer's cost in each format on the target's own tool.

    - graph_quantize:
      - scheme: W8-A8
        sensitivity: [W8-A8, W8-A16]   # the first is the base; `true`: the backend's first two schemes

Written to the step's artifacts as layers_sensitivity.json (SENSITIVITY_FILE) and shown by `np report --layers`.

SNR: the base model is the step's input quantized all in the base format; for each (layer, other format) the same
input quantized with only that layer in the other format (graph_quantize's `layers:` machinery, so the real quantized
program, RESCALEs at the boundaries and the neighbours' input formats included), calibrated on the step's own
calibration samples; each program's output SNR against the step's float input on those samples and on up to
VALIDATION_SAMPLES of the dataset's samples past the calibration and the evaluation ones (RunContext.validation: a
split that neither calibrates nor scores a program, so the SNR np reports for a trial stays on inputs its plan never
saw). Why not the calibration samples alone: on them every range is covered, so a layer whose int8 range clips inputs
the calibration did not show looks free (on the bench's cnn_raw an int8 `<output>`: +0.04 dB on 4 calibration
samples, -6 dB on held-out inputs; on its transformer `<output>` and head: +0.7 and -3.7 dB on calibration samples,
-4.5 and -4.8 dB on 5 held-out ones). Without a dataset (or none past the evaluation samples) the calibration samples
alone, as the file says (`snr.validation_samples`: 0). `snr_loss_db` = SNR(only this layer in the format) -
SNR(base): what the model loses by keeping the layer in the base format.

Cost: one compile of the whole model per candidate format (every layer in it; the backend's limits still apply, e.g.
U55 int16 matmuls stay int8) gives every layer's cost in that format at once, from the tool np profiles with: Vela's
per-layer cycles through MLIA on Ethos-U, the traced per-layer times of the runtime on this machine (host) for XNNPACK.
One compile per format instead of one per (layer, format): a layer's cost depends mainly on its own format, so
F compiles give the table that L x F compiles would, minus the RESCALE a lone layer adds at its boundaries.

What it costs: 1 + L x (F - 1) quantizations (L weighted layers, F formats) and F - 1 more for the uniform programs,
then F compiles and F estimates (or traced measurements). Off unless asked, so ordinary runs pay nothing.

The file also orders the moves out of the base format greedily (greedy_moves: SNR gained per unit of extra cost), the
order a sweep would take them in; the compiles and rounds are made in a temporary folder, and each format's per-layer
file is kept in artifacts/sensitivity/.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.backends.base import FLOAT
from np_optimizer.config.layer_formats import SENSITIVITY_AUTO
from np_optimizer.files import write_json
from np_optimizer.layers.files import SENSITIVITY_FILE
from np_optimizer.quantize.layer_formats import IO_PATHS

if TYPE_CHECKING:
    from torch.export import ExportedProgram

    from np_optimizer.devices import Device
    from np_optimizer.pipeline.context import StepContext
    from np_optimizer.quantize.layer_formats import LayerFormats

__all__ = ["SENSITIVITY_FILE", "candidates_for", "greedy_moves", "layer_params", "analyse", "sensitivity_step"]

VALIDATION_SAMPLES = 16  # at most, of the dataset's samples past the evaluation ones
_HOST_MEASURE = {"num_executions": 3, "warmup": 1, "num_layer_executions": 5, "timeout": 120}


def candidates_for(asked: tuple[str, ...], schemes: tuple[str, ...]) -> tuple[str, ...]:
    """`true`: the backend's first two schemes (Ethos-U W8-A8 and W8-A16, XNNPACK W8-A8 and W8-A8_dynamic)."""
    return (*schemes[:2], FLOAT)[:2] if asked == (SENSITIVITY_AUTO,) else asked


def _db(value: float) -> float | None:
    return round(value, 3) if math.isfinite(value) else None


def sensitivity_step(ctx: StepContext, asked: tuple[str, ...], samples: list[Any], always_float: frozenset[str],
                     changes: dict[str, Any]) -> list[str]:
    """graph_quantize's hook: nothing unless `sensitivity:` asks; else the file, `changes["sensitivity"]` and its
    warnings."""
    if not asked:
        return []
    changes["sensitivity"], warnings = analyse(ctx, asked, samples, always_float)
    return warnings


class _Quantizer:
    """The step's input quantized with a plan of formats, and its output SNR against the float input."""

    def __init__(self, ctx: StepContext, samples: list[Any], always_float: frozenset[str]) -> None:
        import torch

        self.ctx, self.samples, self.always_float = ctx, samples, always_float
        self.validation = ctx.run.validation(VALIDATION_SAMPLES)
        self.inputs = [*samples, *self.validation.samples]  # see the module's docstring
        with torch.no_grad():
            self.reference = [ctx.program.module()(*x) for x in self.inputs]

    def plan(self, scheme: str, layers: tuple[tuple[str, str], ...] = ()) -> LayerFormats:
        from np_optimizer.quantize.layer_formats import LayerFormats

        device = self.ctx.run.device
        return LayerFormats(scheme, layers, float_modules=self.always_float, limit=device.backend_spec.format_limit,
                            target=device.mlia_target)

    def quantize(self, scheme: str, layers: tuple[tuple[str, str], ...] = ()) -> ExportedProgram:
        from np_optimizer.quantize.pt2e import quantize_program

        device = self.ctx.run.device
        return quantize_program(self.ctx.program, backend=device.backend, scheme=scheme, target=device.mlia_target,
                                calibration=self.samples, keep_float=self.always_float,
                                formats=self.plan(scheme, layers))

    def snr(self, program: ExportedProgram) -> float:
        import torch

        from np_optimizer.fidelity import snr_db

        with torch.no_grad():
            return snr_db(self.reference, [program.module()(*x) for x in self.inputs])


def greedy_moves(rows: dict[str, dict[str, dict[str, Any]]], base: str, *, measured: bool = True
                 ) -> list[dict[str, Any]]:
    """The per-layer moves out of the base format in greedy order, as AIMET's AMP orders them: each layer's best move
    (the format with the most SNR gained per unit of extra cost), then the moves by gain per unit of cost; moves that
    gain nothing are left out. A measured cost (the target's table) is floored at the median extra cost of the moves
    it prices above zero: the table's small differences are not the target's (a move adds int8/int16 RESCALEs at its
    boundaries that no per-layer row holds; on the bench's transformer the moves Vela priced at 0 or 1 extra cycle,
    taken first, cost 8% of the latency for no measured gain), so a move priced free or nearly free competes on its
    gain with a typical priced move instead of going ahead of every one. A move the table does not price (a layer its
    rows do not name in a format: `extra_cost` None) is priced as a typical priced move too: at that median, or free
    when no priced move costs more than nothing. Without a median the moves that cost nothing go first, by gain, then
    by gain per unit of cost. Exact costs (`measured=False`: weight bytes) are not floored and a move without one is
    left out. `predicted_*` sums the table's own figures along the order (the cost None from the first unpriced move):
    a prediction (the layers' effects do not simply add), never a measurement."""
    options: list[tuple[str, str, float, float | None]] = []
    for module, cells in rows.items():
        base_cost = cells[base].get("cost")
        for fmt, cell in cells.items():
            gain, cost = cell.get("snr_loss_db"), cell.get("cost")
            if fmt != base and gain is not None and gain > 0:
                options.append((module, fmt, float(gain),
                                None if cost is None or base_cost is None else float(cost) - float(base_cost)))
    priced = [extra for *_, extra in options if extra is not None and extra > 0]
    floor = statistics.median(priced) if priced and measured else None
    if not measured:
        options = [o for o in options if o[3] is not None]

    def rank(option: tuple[str, str, float, float | None]) -> tuple[int, float]:  # the smaller the better
        _module, _fmt, gain, extra = option
        cost = extra if extra is not None else floor or 0.0  # unpriced: as a typical priced move
        if floor is not None:
            return 0, -gain / max(cost, floor)
        return (0, -gain) if cost <= 0 else (1, -gain / cost)  # a free gain first

    best: dict[str, tuple[str, str, float, float | None]] = {}
    for option in options:
        if option[0] not in best or rank(option) < rank(best[option[0]]):
            best[option[0]] = option
    out: list[dict[str, Any]] = []
    gained, spent = 0.0, 0.0
    known = True
    for module, fmt, gain, extra in sorted(best.values(), key=lambda o: (*rank(o), o[0], o[1])):
        gained, known = gained + gain, known and extra is not None
        spent += extra or 0.0
        out.append({"module": module, "format": fmt, "snr_gain_db": round(gain, 3),
                    "extra_cost": None if extra is None else round(extra, 6),
                    "predicted_snr_gain_db": round(gained, 3),
                    "predicted_extra_cost": round(spent, 6) if known else None})
    return out


def _loss_order(cells: dict[str, dict[str, Any]]) -> float:
    """A layer's largest SNR loss over its formats."""
    return max(float(c["snr_loss_db"]) if c.get("snr_loss_db") is not None else 0.0 for c in cells.values())


def _per_layer(ctx: StepContext, q: _Quantizer, formats: tuple[str, ...]
               ) -> tuple[float, dict[str, dict[str, dict[str, Any]]], ExportedProgram]:
    """The base model's SNR, each (layer, format)'s SNR and loss, and the base model."""
    from np_optimizer.quantize.layer_formats import INPUT, OUTPUT, program_keys
    from np_optimizer.quantize.pt2e import weighted_layers

    base, others = formats[0], formats[1:]
    ctx.progress(f"sensitivity: {base} everywhere")
    base_program = q.quantize(base)
    base_snr = q.snr(base_program)
    keys = program_keys(ctx.program)
    modules = [m for m in dict.fromkeys(m for _n, m in weighted_layers(ctx.program)) if m not in q.always_float]
    if ctx.run.device.backend_spec.io_formats:  # the model's input and output, measured as a layer is
        modules = [INPUT, *modules, OUTPUT]
    rows: dict[str, dict[str, dict[str, Any]]] = {m: {base: {"snr_db": _db(base_snr), "snr_loss_db": 0.0}}
                                                  for m in modules}
    for index, module in enumerate(modules, 1):
        for fmt in others:
            plan = q.plan(base, ((module, fmt),))
            # ops of the layer the target refuses in the format (U55 int16 matmul) keep the limit's format, as in
            # the uniform compile; measured all the same, and said
            limited = next((r[1] for k in keys if (r := plan.refused(k)) is not None), None)
            ctx.progress(f"sensitivity {index}/{len(modules)}: {module} in {fmt}")
            value = q.snr(q.quantize(base, ((module, fmt),)))
            rows[module][fmt] = {"snr_db": _db(value), "snr_loss_db": _db(value - base_snr),
                                 **({"limited": limited} if limited else {})}
    return base_snr, rows, base_program


def layer_params(program: ExportedProgram) -> dict[str, int]:
    """Each weighted layer's parameter count (weights and bias): a sweep's `budget: size` prices a move by it."""
    from np_optimizer.quantize.pt2e import is_weighted, module_path

    names, state = program.graph_signature.inputs_to_parameters, program.state_dict
    out: dict[str, int] = {}
    for node in program.graph.nodes:
        if is_weighted(node):
            count = sum(int(state[names[a.name]].numel()) for a in node.all_input_nodes
                        if a.op == "placeholder" and a.name in names and names[a.name] in state)
            out[module_path(node)] = out.get(module_path(node), 0) + count
    return out


def analyse(ctx: StepContext, asked: tuple[str, ...], samples: list[Any],
            always_float: frozenset[str]) -> tuple[dict[str, Any], list[str]]:
    """Measure every (weighted layer, format) and write the file; returns job.json's summary and the warnings."""
    device = ctx.run.device
    formats = candidates_for(asked, device.backend_spec.scheme_names)
    start = time.perf_counter()
    q = _Quantizer(ctx, samples, always_float)
    base_snr, rows, base_program = _per_layer(ctx, q, formats)
    snr_seconds = time.perf_counter() - start
    uniform = {formats[0]: base_program}
    for fmt in formats[1:]:
        ctx.progress(f"sensitivity: {fmt} everywhere (its cost)")
        uniform[fmt] = q.quantize(fmt)
    costs, cost_about, warnings = _costs(ctx, uniform)
    for module, by_format in rows.items():
        for fmt, cell in by_format.items():
            # the model's input and output have no row of their own in a per-layer table: their cost is in the rows
            # of the layers reading and writing them (and the CPU's quantize, outside the NPU's estimate)
            cell["cost"] = (0.0 if fmt in costs else None) if module in IO_PATHS else costs.get(fmt, {}).get(module)
    ranked = sorted(rows.items(), key=lambda item: -_loss_order(item[1]))
    params = {**layer_params(ctx.program), **dict.fromkeys(IO_PATHS, 0)}
    seconds = {"snr": round(snr_seconds, 2), "total": round(time.perf_counter() - start, 2)}
    document = {"schema_version": 1, "checkpoint": "GRAPH_QUANTIZE", "device": device.name, "base": formats[0],
                "formats": list(formats), "base_snr_db": _db(base_snr),
                "snr": {"vs": "the step's input program (float)",
                        "inputs": "the step's calibration samples and the dataset's past the evaluation samples",
                        "calibration_samples": len(samples), "validation_samples": len(q.validation.samples),
                        "validation": q.validation.source,
                        "how": "output SNR of the model quantized in the base format with only this layer in the "
                               "format; snr_loss_db: that SNR minus the base model's (what the layer loses in the "
                               "base format)"},
                "cost": cost_about, "seconds": seconds, "warnings": warnings,
                "layers": [{"module": m, "params": params.get(m), "formats": cells} for m, cells in ranked],
                "moves": greedy_moves(rows, formats[0])}
    write_json(ctx.artifacts_dir / SENSITIVITY_FILE, document)
    ctx.log.info(f"  sensitivity: {len(rows)} layer(s) x {len(formats)} format(s) in {seconds['total']:.1f} s "
                 f"({SENSITIVITY_FILE})")
    return {"file": SENSITIVITY_FILE, "formats": list(formats), "layers": len(rows), "seconds": seconds,
            "most_sensitive": ranked[0][0] if ranked else None}, warnings


def _costs(ctx: StepContext, uniform: dict[str, ExportedProgram]
           ) -> tuple[dict[str, dict[str, float]], dict[str, Any], list[str]]:
    """Per format, each module's cost from one compile of the whole model in that format, and how it was had. The
    compiles and rounds are made in a temporary folder (the compile cache keeps the compiles; the step cache would
    otherwise store them with the job's artifacts); each format's per-layer file is kept in artifacts/sensitivity/."""
    import tempfile

    from np_optimizer.devices import default_method, get_device

    device = ctx.run.device
    on_npu = bool(device.backend_spec.layer_costs)
    where = device if on_npu else get_device("host")  # a CPU device's figures: traced on this machine
    method = default_method(where)
    costs: dict[str, dict[str, float]] = {}
    about: dict[str, Any] = {"unit": None, "method": method, "measured_on": where.name, "totals": {}, "files": {},
                             "how": "one compile of the whole model per format (every layer in it, the backend's "
                                    "limits applied): each layer's cost in that format, summed over its rows"}
    warnings: list[str] = []
    with tempfile.TemporaryDirectory(prefix="np-sensitivity-") as work:
        for fmt, program in uniform.items():
            ctx.progress(f"sensitivity: the cost of {fmt} ({method} on {where.name})")
            document = _round(ctx, program, Path(work) / fmt, method, where, warnings, fmt)
            if document is None:
                continue
            cost = document.get("cost") or {}
            about.update(unit=cost.get("unit"), source=cost.get("source"))
            about["totals"][fmt] = cost.get("total")
            per_module: dict[str, float] = {}
            for entry in document.get("layers") or []:
                module = entry.get("module") or entry.get("key")
                if module and entry.get("cost") is not None:
                    per_module[str(module)] = per_module.get(str(module), 0.0) + float(entry["cost"])
            costs[fmt] = per_module
            name = f"sensitivity/{fmt}.layers.json"
            write_json(ctx.artifacts_dir / name, document)
            about["files"][fmt] = name
    if not on_npu:
        warnings.append(f"Costs on {device.name} are the traced per-layer times of this machine (host), which "
                        "ranks the formats as the device's CPU would, not its own times.")
    return costs, about, warnings


def _round(ctx: StepContext, program: ExportedProgram, folder: Path, method: str, where: Device,
           warnings: list[str], fmt: str) -> dict[str, Any] | None:
    """One compile of `program` for the step's device and the method's round on it: the round's per-layer document,
    or None with the reason in `warnings`."""
    from np_optimizer.compile import compile_checkpoint
    from np_optimizer.errors import NpError
    from np_optimizer.files import read_json
    from np_optimizer.graph.program_io import save_program
    from np_optimizer.models.source import sha256_file
    from np_optimizer.profiler.methods import get_method
    from np_optimizer.profiler.request import ProfileRequest
    from np_optimizer.records.status import CompileStatus

    device = ctx.run.device
    path = save_program(program, folder / "model.pt2")
    sha = sha256_file(path)
    compiled = compile_checkpoint(path, device, folder / "compiled", program_sha256=sha)
    if compiled.status != CompileStatus.OK:
        warnings.append(f"No cost in {fmt}: its compile for {device.name} is {compiled.status} ({compiled.reason}).")
        return None
    request = ProfileRequest(checkpoint=f"GRAPH_QUANTIZE[{fmt}]", job=ctx.artifacts_dir.parent.name,
                             program_path=path, program_sha256=sha, compiled=compiled,
                             compiled_dir=folder / "compiled", device=where, options=dict(_HOST_MEASURE),
                             work_dir=folder / "profile", log=ctx.log)
    try:
        output = get_method(method).profile(request)
    except NpError as exc:
        warnings.append(f"No cost in {fmt}: {exc.message}")
        return None
    name = output.artifacts.get("layers")
    if not name:
        warnings.append(f"No per-layer cost in {fmt}: the {method} round gave none ({'; '.join(output.warnings)})")
        return None
    return read_json(request.work_dir / name)
