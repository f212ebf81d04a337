"""The Ethos-U backend: ExecuTorch's Arm backend lowers to TOSA, then Vela compiles for the NPU. Its schemes use
EthosUQuantizer; its programs run only on the NPU's firmware, and MLIA estimates them.

The .tosa and Vela's summary CSV are kept beside the .pte; the .pte names neither, nor any folder (program_spec). A float program gives zero delegates and no error (the
Ethos-U TOSA profile is integer only): that is recorded as "lowering unsupported", not raised.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import logging
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.backends.base import (
    FLOAT,
    Backend,
    KeepFloat,
    Lowered,
    NodeFormat,
    QuantizerBuilder,
    Scheme,
    register_backend,
)
from np_optimizer.backends.xnnpack import register_quantized_out_variants
from np_optimizer.processes import stage
from np_optimizer.records.status import CompileStatus

if TYPE_CHECKING:
    from torch.export import ExportedProgram
    from torch.fx import GraphModule, Node

__all__ = ["ETHOS_U", "lower_ethos_u", "describe_ethos_u", "is_quantized", "read_vela_summary", "PARTITION_DEBUG",
           "partition_files", "program_spec", "COMPILE_ONLY_SPECS", "ethos_u_format_limit"]

# The Arm backend runs Vela with --verbose-all (hundreds of lines per delegate) whenever this logger is enabled for
# INFO, which a root logger at INFO does: keep it at WARNING while lowering.
_VERBOSE_LOGGER = "executorch.backends.arm.ethosu.backend"


@contextlib.contextmanager
def _logger_level(name: str, level: int) -> Iterator[None]:
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


def is_quantized(program: ExportedProgram) -> bool:
    return any(n.op == "call_function" and "quantize_per" in str(n.target) for n in program.graph.nodes)


def read_vela_summary(path: Path) -> dict[str, Any]:
    """First row of Vela's summary CSV with numbers parsed (Vela's units: seconds and KiB)."""
    with open(path, newline="") as handle:
        row = next(csv.DictReader(handle))
    out: dict[str, Any] = {}
    for key, value in row.items():
        for cast in (int, float):
            try:
                out[key] = cast(value)
                break
            except ValueError:
                continue
        else:
            out[key] = value
    return out


def vela_settings(target: str) -> dict[str, str]:
    """The Vela system config, memory mode and vela.ini of MLIA's target profile, so the compiled .pte and MLIA's
    estimate describe the same memory layout (ExecuTorch's own default for U85 is Sram_Only, MLIA's Dedicated_Sram)."""
    return dict(_vela_settings(target))


@functools.cache
def _vela_settings(target: str) -> tuple[tuple[str, str], ...]:
    """Read once per process: a compile asks three times (its cache key, the lowering, the record)."""
    from mlia.target.registry import profile  # light: imports no torch

    config = profile(target)
    resolved = config.resolved_compiler_config
    return (("system_config", resolved.system_config), ("memory_mode", resolved.memory_mode),
            ("config_ini", str(config.compiler_options.config_file)))


@contextlib.contextmanager
def _vela_safe(artifacts: Path, config_ini: Path) -> Iterator[tuple[Path, Path]]:
    """A working folder and vela.ini whose paths have no space, and the artifacts moved into `artifacts` after.

    ExecuTorch 1.4.1's Arm backend joins Vela's arguments with spaces and splits them again
    (backends/arm/arm_vela.py), so a path with a space (a workspace in "my models/", a venv under "My Projects")
    breaks every compile, and Vela then exits with SystemExit.
    """
    if " " not in str(artifacts.resolve()) and " " not in str(config_ini):
        yield artifacts, config_ini
        return
    base = next((d for d in (tempfile.gettempdir(), "/tmp") if " " not in d and Path(d).is_dir()), None)
    if base is None:
        raise ValueError(f"Vela cannot take paths with spaces ({artifacts}) and no temporary folder without one "
                         "was found: set TMPDIR to a folder whose path has no space")
    work = Path(tempfile.mkdtemp(prefix="np-ethos-u-", dir=base))
    try:
        shutil.copy2(config_ini, work / "vela.ini")
        yield work, work / "vela.ini"
        (work / "vela.ini").unlink()
        for item in work.iterdir():
            shutil.move(str(item), str(artifacts / item.name))
    finally:
        shutil.rmtree(work, ignore_errors=True)


PARTITION_DEBUG = "debug_{tag}.json"  # one per NPU partition, beside its output_{tag}_<spec>.tosa
_TOSA_TAG = re.compile(r"^output_(tag(\d+))_.*\.tosa$")


def partition_files(folder: Path) -> list[tuple[str, Path]]:
    """(delegation tag, .tosa) of each NPU partition the lowering left in `folder`, in tag order (tag2 before
    tag10); the tag also names the partition's Arm debug information (PARTITION_DEBUG)."""
    found = [(m, p) for p in folder.glob("output_tag*.tosa") if (m := _TOSA_TAG.match(p.name))]
    return [(m.group(1), p) for m, p in sorted(found, key=lambda mp: int(mp[0].group(2)))]


@contextlib.contextmanager
def _debug_per_partition() -> Iterator[None]:
    """Keep each NPU partition's Arm debug information: ExecuTorch's TOSA backend writes every partition's to the same
    debug.json, so all but the last would be lost (its per-layer rows then key the other partitions' TOSA names to
    nothing, or to the wrong module). After each partition's TOSA preprocessing, its debug.json is copied under the
    partition's delegation tag, the tag its .tosa file is named by.

    Each partition's TOSA lowering and Vela compile are announced as stages (processes.stage), so a watched lowering
    shows which one runs. The hooks into ExecuTorch's Arm backend are adapters/executorch_private.py's."""
    from np_optimizer.adapters.executorch_private import arm_partition_hooks

    current: dict[str, Any] = {"tag": "tag", "count": 0}

    def before_tosa(tag: str | None) -> None:
        current["tag"] = tag or "tag"
        current["count"] = int(current["count"]) + 1
        stage(f"TOSA lowering of NPU partition {current['count']} ({current['tag']})")

    def after_tosa(folder: str | None) -> None:
        debug = Path(folder) / "debug.json" if folder else None
        if debug is not None and debug.is_file():
            shutil.copyfile(debug, debug.with_name(PARTITION_DEBUG.format(tag=current["tag"])))

    def before_vela(tosa_flatbuffer: bytes) -> None:
        stage(f"Vela on NPU partition {current['count']} ({current['tag']}, {len(tosa_flatbuffer):,} B of TOSA)")

    with arm_partition_hooks(before_tosa, after_tosa, before_vela):
        yield


def ethos_u_compile_options(target: str | None) -> dict[str, Any]:
    """The target profile and the Vela settings it resolves to (system config, memory mode, vela.ini). The vela.ini
    is named, not located: its content is fixed by the MLIA version, which is in the key too, and the same tools
    installed in another folder compile the same bytes."""
    if not target:
        return {"target": None}
    vela = vela_settings(target)
    return {"target": target, **vela, "config_ini": Path(vela["config_ini"]).name}


def lower_ethos_u(program: ExportedProgram, target: str | None, work_dir: Path) -> Lowered:
    stage("loading ExecuTorch's Arm backend")
    from executorch.backends.arm import EthosUCompileSpec, EthosUPartitioner
    from executorch.backends.arm.common.arm_compile_spec import ArmCompileSpec
    from executorch.exir import to_edge_transform_and_lower

    from np_optimizer.adapters.executorch_private import (
        edge_config_unchecked,
        partition_rejects,
        rewrite_compile_specs,
    )
    from np_optimizer.graph.embedding_kernels import fuse_quantized_embeddings

    if not target:
        raise ValueError("an Ethos-U lowering needs the device's target profile (mlia_target)")
    register_quantized_out_variants()
    # an embedding table graph_quantize's option quantized (one the Arm quantizer left float) runs on the CPU's
    # quantized embedding kernel; the tables the Arm quantizer quantized are gathers it lowers itself
    program, _count = fuse_quantized_embeddings(program)
    artifacts = work_dir / "ethos_u"
    artifacts.mkdir(parents=True, exist_ok=True)
    vela = vela_settings(target)
    with _vela_safe(artifacts, Path(vela["config_ini"])) as (work, config_ini):
        spec = EthosUCompileSpec(target, system_config=vela["system_config"], memory_mode=vela["memory_mode"],
                                 config_ini=str(config_ini))
        spec.dump_intermediate_artifacts_to(str(work))  # before the partitioner copies the spec
        spec.dump_debug_info(ArmCompileSpec.DebugMode.JSON)  # debug.json: TOSA op -> nn_module_stack, for the layers
        # partition_rejects: the Arm support checks' reason for each node they keep off the NPU
        with _logger_level(_VERBOSE_LOGGER, logging.WARNING), _debug_per_partition(), partition_rejects() as rejected:
            stage("TOSA lowering (Edge dialect, NPU partitioning)")
            edge = to_edge_transform_and_lower(
                program,
                partitioner=[EthosUPartitioner(spec)],
                # As in Arm's reference flow (aot_arm_compiler.py): its passes emit non-core-ATen ops.
                compile_config=edge_config_unchecked(),
            )
    rewrite_compile_specs(edge, program_spec)
    return Lowered(edge, dict(rejected))


# Compile specs that served the compile only: where the lowering left its intermediates and in which form. The
# runtime's Ethos-U delegate reads none of the Arm keys (its Linux driver reads only `ethosu.*` keys), so what the
# .pte keeps of them is for ExecuTorch's tools, which parse tosa_spec, compile_flags, output_format and target.
COMPILE_ONLY_SPECS = ("debug_artifact_path", "dump_debug_info")
_VELA_CONFIG_FLAG = "--config="


def program_spec(key: str, value: bytes) -> bytes | None:
    """A delegate's compile spec as the .pte stores it: None (dropped) for the compile-only ones, Vela's flags with
    the vela.ini named, not located (as in the compile key). Else as it was. So the .pte holds no path of this machine
    (the compile folder, the virtual environment) and the same program compiles to the same bytes anywhere."""
    if key in COMPILE_ONLY_SPECS:
        return None
    if key != "compile_flags":
        return value
    # ExecuTorch joins the flags with spaces (and _vela_safe keeps spaces out of the vela.ini's path)
    flags = [_VELA_CONFIG_FLAG + Path(flag[len(_VELA_CONFIG_FLAG):]).name if flag.startswith(_VELA_CONFIG_FLAG)
             else flag for flag in value.decode().split(" ")]
    return " ".join(flags).encode()


def preload_ethos_u() -> None:
    """The Arm backend's modules, imported once in np's process (a watched lowering's child inherits them)."""
    import executorch.backends.arm.ethosu.backend  # noqa: F401
    import executorch.backends.arm.tosa.backend  # noqa: F401
    from executorch.backends.arm import EthosUPartitioner  # noqa: F401


def ethos_u_executorch_config() -> Any:
    from executorch.exir import ExecutorchBackendConfig

    return ExecutorchBackendConfig(extract_delegate_segments=False)


def describe_ethos_u(program: ExportedProgram, target: str | None, stats: dict[str, Any],
                     work_dir: Path) -> dict[str, Any]:
    """The TOSA and Vela files the lowering left in `work_dir`, Vela's summary, and why nothing was delegated."""
    artifacts = work_dir / "ethos_u"
    # Files of executorch 1.4.1's Arm backend: output_tag<N>_<spec>.tosa per delegate, and Vela's
    # output/out_summary_<system config>.csv for the last delegate only (Vela overwrites per delegate).
    tosa = [path for _tag, path in partition_files(artifacts)]
    summaries = sorted(artifacts.glob("output/out_summary_*.csv"))
    quantized = is_quantized(program)
    fields: dict[str, Any] = {}
    if stats["num_delegates"] == 0:
        fields["status"] = CompileStatus.UNSUPPORTED
        fields["reason"] = ("the checkpoint is float: Ethos-U runs int8/int16 only, so no operator was delegated "
                            "(quantize it with graph_quantize)" if not quantized
                            else "no operator of the checkpoint is supported by the Ethos-U partitioner")
    return {
        **fields,
        "tosa_file": str(tosa[-1].relative_to(work_dir)) if tosa else None,
        "vela_summary_file": str(summaries[0].relative_to(work_dir)) if summaries else None,
        "vela_summary": read_vela_summary(summaries[0]) if summaries else None,
        "vela_summary_partial": stats["num_delegates"] > 1,
        "vela_config": vela_settings(target) if target else None,
        "quantized": quantized,
    }


def _quantizer(a16: bool) -> QuantizerBuilder:
    def build(target: str | None, keep: KeepFloat, keep_any: bool) -> Any:
        from executorch.backends.arm import (
            EthosUCompileSpec,
            EthosUQuantizer,
            get_symmetric_a16w8_quantization_config,
            get_symmetric_quantization_config,
        )

        config = (get_symmetric_a16w8_quantization_config if a16 else get_symmetric_quantization_config)(
            is_per_channel=True)
        quantizer = EthosUQuantizer(EthosUCompileSpec(target or "ethos-u85-256"))
        quantizer.set_global(config)
        if keep_any:
            from np_optimizer.adapters.executorch_private import experimental_warning

            with warnings.catch_warnings():  # set_node_finder is marked experimental in executorch 1.4
                warnings.simplefilter("ignore", experimental_warning())
                quantizer.set_node_finder(None, _node_finder(keep))
        return quantizer

    return build


def _mixed_quantizer(target: str | None, scheme: str, node_format: NodeFormat) -> Any:
    """One EthosUQuantizer giving each node its format: the scheme's config globally, then a node finder per other
    format (disjoint sets, so the V2 quantizer's "most recent wins" never has to choose). An int8/int16 boundary
    becomes a TOSA RESCALE inside the NPU partition. The model's inputs (placeholders) and output node are nodes
    like the others: node_format gives them `<input>`'s and `<output>`'s format, as the quantizer's own set_io
    would (its InputNodeFinder and OutputNodeFinder find the same nodes)."""
    from executorch.backends.arm import (
        EthosUCompileSpec,
        EthosUQuantizer,
        get_symmetric_a16w8_quantization_config,
        get_symmetric_quantization_config,
    )

    from np_optimizer.adapters.executorch_private import experimental_warning

    configs = {"W8-A8": get_symmetric_quantization_config(is_per_channel=True),
               "W8-A16": get_symmetric_a16w8_quantization_config(is_per_channel=True), FLOAT: None}
    quantizer = EthosUQuantizer(EthosUCompileSpec(target or "ethos-u85-256"))
    quantizer.set_global(configs[scheme])
    with warnings.catch_warnings():  # set_node_finder is marked experimental in executorch 1.4
        warnings.simplefilter("ignore", experimental_warning())
        for name, config in configs.items():
            if name != scheme:
                quantizer.set_node_finder(config, _node_finder(_is_format(node_format, name)))
    return quantizer


def _is_format(node_format: NodeFormat, name: str) -> KeepFloat:
    return lambda node: node_format(node) == name


_MATMULS = ("aten.matmul.default", "aten.bmm.default", "aten.mm.default")


def ethos_u_format_limit(target: str | None, fmt: str, op: str) -> tuple[str, str] | None:
    """What the Ethos-U compile refuses in a format. On U55 the Arm partitioner takes mm/bmm with int8 inputs only
    (operator_support/ethos_u55_support.py, EthosU55DtypeSupport): an int16 matmul leaves the NPU, and in executorch
    1.5.1 a W8-A16 attention block fails at Vela ("TOSA FB Reader error"), while the same matmuls in int8 lower in
    the one NPU partition."""
    if fmt == "W8-A16" and op in _MATMULS and (target or "").startswith("ethos-u55"):
        return "W8-A8", "int16 matmul not supported on U55: int8"
    return None


def _node_finder(keep: KeepFloat) -> Any:
    from executorch.backends.arm.quantizer.arm_quantizer_utils import NodeFinder

    # a node finder with config None overrides the global config; executorch's arm quantizer has no type information
    class _KeepFloatFinder(NodeFinder):  # type: ignore[misc]
        def find_nodes(self, model: GraphModule) -> Iterator[Node]:
            return (n for n in model.graph.nodes if keep(n))

    return _KeepFloatFinder()


ETHOS_U = register_backend(Backend(
    name="ethos-u",
    display_name="Arm Ethos-U NPU (ExecuTorch Arm backend, TOSA + Vela)",
    schemes=(
        Scheme("W8-A8", _quantizer(a16=False), "static int8 weights (per channel) and activations"),
        Scheme("W8-A16", _quantizer(a16=True), "int8 weights, int16 activations"),
    ),
    lower=lower_ethos_u,
    describe=describe_ethos_u,
    executorch_config=ethos_u_executorch_config,
    runs_on_host=False,
    mlia_estimable=True,
    advanced_quantize=False,
    layer_costs=True,
    tool_versions=("executorch", "torch", "ethos-u-vela", "mlia"),  # MLIA's target profile sets the Vela config
    compile_options=ethos_u_compile_options,
    watched=True,  # an unrolled LSTM took 744 s of TOSA lowering and Vela
    preload=preload_ethos_u,
    accelerator="the NPU",
    rewrites=("avg_pool_as_mean", "drop_constant_attention_mask"),
    no_reason="left on the CPU by the Arm partitioner ({op}; it gave no reason)",
    mixed=_mixed_quantizer,
    format_limit=ethos_u_format_limit,
    io_formats=True,  # the Arm quantizer annotates placeholders and the output node themselves (its set_io)
    notes="Programs run only on the NPU's firmware; np estimates them with MLIA.",
))
