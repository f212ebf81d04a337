"""PT2E post-training quantization with the backend's own quantizer.

    quantize_program(program, backend="xnnpack", scheme="W8-A8", target=None, calibration=[...], keep_float={...})

The schemes and their quantizer builders belong to the backends (np_optimizer.backends): a new scheme is one
`Scheme(name, build)` in its backend's module.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from np_optimizer.backends import KeepFloat, get_backend
from np_optimizer.backends.base import FLOAT
from np_optimizer.errors import UnsupportedError
from np_optimizer.quantize.layer_formats import LayerFormats, node_key, program_keys

if TYPE_CHECKING:
    import torch
    from torch.export import ExportedProgram
    from torch.fx import GraphModule, Node

__all__ = ["quantize_program", "quantized_layers", "weighted_layers", "module_path", "is_weighted", "format_rows"]

def _module_path(path: str) -> str:
    prefix = "L['self']."  # older capture APIs; torch.export records "layer1.conv"
    return path[len(prefix):] if path.startswith(prefix) else path


def _keep_float(names: frozenset[str]) -> KeepFloat:
    """True for nodes to leave in float: the node's name, or any enclosing module's path, is in `names`."""

    def matches(node: Node) -> bool:
        if node.name in names:
            return True
        stack = node.meta.get("nn_module_stack") or {}
        return any(_module_path(path) in names for path, _ in stack.values())

    return matches


_SCALAR_OPERAND_OPS = ("aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.div.Tensor")


def _integer_scalars_to_constants(module: GraphModule) -> int:
    """Give every Python scalar operand of an integer `add`/`sub`/`mul`/`div` node a tensor constant of the node's own
    dtype; returns how many. Nothing else in the graph changes, nor what it computes.

    Why: ExecuTorch's XNNPACKQuantizer.transform_for_annotation (`_convert_scalars_to_attrs`) turns each scalar of an
    `add.Tensor`/`mul.Tensor` into a *float32* tensor, whatever the other operand is. On integer arithmetic (the
    position ids and mask indices a Hugging Face model computes in its graph: `arange(32) + 0`) type promotion then
    makes the result float, and the `aten.index` that takes it fails at calibration with "tensors used as indices must
    be long, int, byte or bool tensors". An operand that is already a node is left alone by that transform.
    """
    import torch

    graph = module.graph
    count = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or str(node.target) not in _SCALAR_OPERAND_OPS:
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.is_floating_point() or val.is_complex():
            continue
        args = list(node.args)
        for index, arg in enumerate(args):
            if not isinstance(arg, int):  # a node, or a float scalar (then the result would not be integer)
                continue
            constant = torch.tensor(arg, dtype=val.dtype)
            name = f"_np_int_scalar_{node.name}_{index}"  # node names are unique in a graph
            module.register_buffer(name, constant)
            with graph.inserting_before(node):
                attr = graph.get_attr(name)
            fake_mode = getattr(val, "fake_mode", None)
            attr.meta["val"] = fake_mode.from_tensor(constant, static_shapes=True) if fake_mode else constant
            args[index] = attr
            count += 1
        node.args = tuple(args)
    if count:
        module.recompile()
    return count


_EMBEDDING = "aten.embedding.default"  # its weight is its first operand, the indices its second
_LAYER_META = ("nn_module_stack", "source_fn_stack", "torch_fn", "stack_trace")


def _embedding_metas(module: GraphModule) -> list[tuple[tuple[int, ...], dict[str, Any]]]:
    """(table shape, the module-identifying meta) of each `aten.embedding`, in graph order."""
    return [(tuple(n.args[0].meta["val"].shape), {k: n.meta[k] for k in _LAYER_META if k in n.meta})
            for n in module.graph.nodes if n.op == "call_function" and str(n.target) == _EMBEDDING
            and hasattr(n.args[0], "meta") and "val" in n.args[0].meta]


def _table_shape(module: GraphModule, node: Any) -> tuple[int, ...]:
    """Shape of a gather's table: its value, or the constant behind its dequantize (convert_pt2e's q/dq nodes carry
    no value)."""
    while getattr(node, "op", None) == "call_function" and _op(node).startswith("quantized_decomposed.dequantize"):
        node = node.args[0]
    if getattr(node, "op", None) == "get_attr":
        value: Any = module
        for part in str(node.target).split("."):
            value = getattr(value, part, None)
        return tuple(getattr(value, "shape", ()))
    val = node.meta.get("val") if hasattr(node, "meta") else None
    return tuple(val.shape) if val is not None else ()


def _restore_embedding_metas(module: GraphModule, metas: list[tuple[tuple[int, ...], dict[str, Any]]]) -> int:
    """Give the gathers a quantizer decomposed embeddings into back their embedding's module; returns how many.

    Why: the Arm quantizer's DecomposeEmbeddingPass (executorch 1.5) turns `embedding(w, i)` into `view(i)`,
    `index_select(w, 0, .)`, `view(.)` without copying the node's meta, so the gather belonged to no module: its
    layer was `(model).index_select`, matched to nothing of INPUT_MODEL (no per-layer SNR). Gathers are matched to
    the embeddings of the same table shape in graph order (the pass inserts each where its embedding was).
    """
    pending: dict[tuple[int, ...], list[dict[str, Any]]] = {}
    for shape, meta in metas:
        pending.setdefault(shape, []).append(meta)
    restored = 0
    for node in module.graph.nodes:
        if node.op != "call_function" or str(node.target) != "aten.index_select.default" \
                or node.meta.get("nn_module_stack") or len(node.args) < 3 or node.args[1] != 0:
            continue
        queue = pending.get(_table_shape(module, node.args[0]))
        if not queue:
            continue
        meta = queue.pop(0)
        around = [node, *(n for n in node.all_input_nodes if n.op == "call_function"), *node.users]
        for item in around:
            if not item.meta.get("nn_module_stack"):
                item.meta.update(meta)
        restored += 1
    return restored


def quantize_program(program: ExportedProgram, *, backend: str, scheme: str, target: str | None,
                     calibration: Sequence[tuple[torch.Tensor, ...]],
                     keep_float: Iterable[str] = frozenset(),
                     formats: LayerFormats | None = None) -> ExportedProgram:
    """Prepare, calibrate on every sample, convert, and re-export (lowering takes an ExportedProgram). With
    `formats` (graph_quantize's `layers:`), each node is quantized in its own format; keep_float still applies."""
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    owner = get_backend(backend)
    build = owner.scheme(scheme).build  # UnsupportedError names the backend's schemes
    names = frozenset(keep_float)
    quantizer = build(target, _keep_float(names), bool(names))
    if formats is not None:
        keep = _keep_float(names)

        def node_format(node: Node) -> str:
            return FLOAT if keep(node) else formats.choice(node_key(node)).format

        keys = program_keys(program)
        if formats.is_uniform(keys):  # the scheme and float only: the one-scheme quantizer, as without `layers:`
            any_float = bool(names) or any(formats.choice(k).format == FLOAT for k in keys)
            quantizer = build(target, lambda node: node_format(node) == FLOAT, any_float)
        elif owner.mixed is None:
            raise UnsupportedError(f"The {owner.name} backend takes one scheme for the whole model.",
                                   hint="Remove graph_quantize's `layers:` formats other than the scheme and float.",
                                   code="NP-GQ-422")
        else:
            quantizer = owner.mixed(target, scheme, node_format)
    # check_guards=False: the default adds a `_guards_fn` call_module node the Arm quantizer's passes reject.
    module = program.module(check_guards=False)
    _integer_scalars_to_constants(module)
    embeddings = _embedding_metas(module)
    prepared = prepare_pt2e(module, quantizer)
    with torch.no_grad():
        for sample in calibration:
            prepared(*sample)
    converted = convert_pt2e(prepared)
    _restore_embedding_metas(converted, embeddings)
    program = torch.export.export(converted, tuple(calibration[0]))
    # The re-exported program still carries the float weights, unused: drop them so the checkpoint holds only what
    # it computes with (the .pt2 of the sample CNN shrinks from 713 KB to about 190 KB).
    from np_optimizer.graph.passes import remove_dead_code

    return remove_dead_code(program).ep


_WEIGHTED = ("conv", "linear", "addmm", "mm", "bmm")


def _op(node: Any) -> str:
    target = node.target
    return str(getattr(target, "_name", None) or getattr(target, "__name__", None) or target).replace("::", ".")


def is_weighted(node: Any) -> bool:
    """A conv or matmul-like ATen node with a weight operand (`aten.conv2d.default`, `aten.linear.default`), or an
    embedding (its table)."""
    if node.op != "call_function" or len(node.args) < 2:
        return False
    if str(node.target) == _EMBEDDING:
        return True
    parts = _op(node).split(".")
    return parts[0] == "aten" and len(parts) > 1 and any(k in parts[1] for k in _WEIGHTED)


def module_path(node: Any) -> str:
    """The path of the innermost module that called the node (`bert.embeddings.word_embeddings`), else its name."""
    stack = node.meta.get("nn_module_stack") or {}
    return _module_path(list(stack.values())[-1][0]) if stack else str(node.name)


def weighted_layers(program: ExportedProgram) -> list[tuple[str, str]]:
    """(node name, module path) of every conv/linear-like node and embedding, in graph order: the candidates for
    mixed precision."""
    return [(n.name, module_path(n)) for n in program.graph.nodes if is_weighted(n)]


def _precision(arg: Any) -> str:
    name = _op(arg) if getattr(arg, "op", None) == "call_function" else ""
    if not name.startswith("quantized_decomposed.dequantize"):
        return "float"
    schema = getattr(arg.target, "_schema", None)  # by name: the group op puts dtype before group_size
    values: dict[str, Any] = dict(zip([a.name for a in schema.arguments], arg.args)) if schema is not None else {}
    values.update(arg.kwargs)
    qmin, qmax, dtype = values.get("quant_min"), values.get("quant_max"), values.get("dtype")
    bits = "int4" if (qmin, qmax) in ((-8, 7), (-7, 7)) else str(dtype).replace("torch.", "")
    return f"{bits} dynamic" if name.endswith(".tensor") else bits


def _is_gather(node: Any) -> bool:
    """An embedding a quantizer decomposed: `index_select(dequantize(table), 0, indices)` (the Arm quantizer's)."""
    return node.op == "call_function" and str(node.target) == "aten.index_select.default" and len(node.args) > 2 \
        and node.args[1] == 0 and _precision(node.args[0]) != "float"


def quantized_layers(program: ExportedProgram) -> list[dict[str, str]]:
    """Per conv/linear node and embedding (or gather on a quantized table): module path, weight precision and
    activation precision, read from the q/dq pattern (an embedding's input is its indices: "indices"); then per
    recurrent node (aten.lstm, gru, rnn_*: one node holds all its weights) the same, its weight "float" when any of
    its weights is read as float."""
    from np_optimizer.graph.stats import recurrent_nodes

    rows = []
    for n in program.graph.nodes:
        embedding = str(n.target) == _EMBEDDING or _is_gather(n)
        if not (embedding or is_weighted(n)):
            continue
        weight, activation = (n.args[0], None) if embedding else (n.args[1], n.args[0])
        rows.append({"node": n.name, "module": module_path(n), "op": _op(n), "weight": _precision(weight),
                     "activation": "indices" if embedding else _precision(activation)})
    nodes = {n.name: n for n in program.graph.nodes}
    for row in recurrent_nodes(program):
        node = nodes[row["node"]]
        rows.append({"node": node.name, "module": module_path(node), "op": _op(node),
                     "weight": "float" if row["params_float"] else "quantized", "activation": _precision(node.args[0])})
    return rows


def format_rows(formats: LayerFormats, program: ExportedProgram, float_modules: frozenset[str], io: bool = False
                ) -> list[dict[str, Any]]:
    """For job.json: each conv/linear-like node, embedding and any node a backend limit moved, in graph order, with
    the format it was given and why (a `layers:` pattern, the scheme, keep_float or the backend's limit); with `io`
    (a backend whose quantizer gives them their own format) the model's inputs first and its output last, as
    modules `<input>` and `<output>`."""
    kept = LayerFormats(formats.scheme, formats.layers, float_modules, formats.limit, formats.target)
    user_inputs = set(program.graph_signature.user_inputs)
    rows = []
    for node in program.graph.nodes:
        is_io = node.op == "output" or (node.op == "placeholder" and node.name in user_inputs)
        if not (node.op == "call_function" or (io and is_io)):
            continue
        key = node_key(node)
        choice = kept.choice(key)
        if is_io or is_weighted(node) or choice.limited:
            rows.append({"module": module_path(node) if not is_io else key.paths[0], "node": node.name,
                         "op": str(node.target) if not is_io else node.op, "format": choice.format,
                         "why": choice.why})
    return rows
