"""The method's inputs: read from a file, or generated (seeded) from --input-spec or the .pte's execution plan; then
checked against what the loaded method expects. torch is imported here only inside the functions (the worker has
imported it already; the supervisor never does)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple

from .protocol import Json, MeasureError
from .pte import SCALAR_TYPES

if TYPE_CHECKING:
    from torch import Tensor

Spec = Tuple[List[int], str]  # shape, dtype name

DTYPE_ALIASES = {
    "float": "float32", "f32": "float32", "fp32": "float32", "half": "float16", "f16": "float16",
    "fp16": "float16", "double": "float64", "f64": "float64", "bf16": "bfloat16", "int": "int32",
    "i32": "int32", "long": "int64", "i64": "int64", "i8": "int8", "u8": "uint8", "i16": "int16",
    "short": "int16",
}
FLOAT_DTYPES = ("float32", "float16", "float64", "bfloat16")


def norm_dtype(name: str) -> str:
    name = name.strip().lower().replace("torch.", "")
    return DTYPE_ALIASES.get(name, name)


def parse_input_spec(text: str) -> List[Spec]:
    """'1x3x64x64:float32,2x4:int64' -> [([1,3,64,64],'float32'), ([2,4],'int64')]"""
    specs = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        shape_s, _, dtype = part.partition(":")
        dtype = norm_dtype(dtype or "float32")
        shape_s = shape_s.strip().lower()
        try:
            shape = [] if shape_s in ("", "scalar", "[]") else [int(d) for d in shape_s.split("x")]
        except ValueError:
            raise MeasureError("usage", "bad --input-spec entry %r: shape must look like 1x3x224x224" % part)
        specs.append((shape, dtype))
    return specs


def plan_specs(plan: Json, method: str) -> List[Spec]:
    """The input specs of an execution plan; every input must be a tensor."""
    specs = []
    for i, inp in enumerate(plan["inputs"]):
        if inp["kind"] != "tensor":
            raise MeasureError("input_error", "input %d of %s is a %s, not a tensor: give --inputs"
                               % (i, method, inp["kind"]))
        specs.append((inp["shape"], inp["dtype"]))
    return specs


def make_inputs(specs: Sequence[Spec], seed: int, int_range: Tuple[int, int]) -> List[Tensor]:
    import torch

    g = torch.Generator().manual_seed(seed)
    lo, hi = int_range
    out = []
    for shape, dtype in specs:
        dt = getattr(torch, dtype, None)
        if not isinstance(dt, torch.dtype):
            raise MeasureError("input_error", "unsupported input dtype %r" % dtype)
        if dtype in FLOAT_DTYPES:
            t = torch.randn(shape, generator=g, dtype=torch.float32).to(dt)
        elif dtype == "bool":
            t = torch.randint(0, 2, shape, generator=g).to(torch.bool)
        else:
            t = torch.randint(lo, hi, shape, generator=g).to(dt)
        out.append(t.contiguous())
    return out


def _read_inputs_file(path: str) -> Any:
    """The file's content: a list of tensors for .npy/.npz, whatever torch.load gives for the rest."""
    import torch

    low = path.lower()
    try:
        if low.endswith((".npy", ".npz")):
            import numpy as np

            data = np.load(path, allow_pickle=False)
            arrays = [data[k] for k in data.files] if low.endswith(".npz") else [data]
            return [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]
        return torch.load(path, map_location="cpu", weights_only=True)
    except ImportError as e:
        raise MeasureError("input_error", "reading %s needs numpy: %s" % (path, e))
    except Exception as e:
        raise MeasureError("input_error", "cannot read inputs file %s: %s: %s" % (path, type(e).__name__, e))


def load_inputs_file(path: str) -> List[Tensor]:
    import torch

    if not os.path.isfile(path):
        raise MeasureError("file_not_found", "inputs file not found: %s" % path, path=path)
    obj = _read_inputs_file(path)
    if isinstance(obj, torch.Tensor):
        obj = [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if not isinstance(obj, (list, tuple)) or not all(isinstance(t, torch.Tensor) for t in obj):
        raise MeasureError("input_error", "inputs file %s must hold a tensor or a list/tuple of tensors" % path)
    return [t.contiguous() for t in obj]


def build_inputs(inputs_file: Optional[str], input_spec: Optional[str], plan: Optional[Json], method: str, seed: int,
                 int_range: Tuple[int, int]) -> Tuple[Optional[List[Tensor]], str]:
    """The inputs and where they come from ("file:PATH", "spec", "pte"). None with "method_meta" when only the
    loaded method can tell: the caller builds them after the load."""
    if inputs_file:
        return load_inputs_file(inputs_file), "file:" + os.path.abspath(inputs_file)
    if input_spec:
        return make_inputs(parse_input_spec(input_spec), seed, int_range), "spec"
    if plan is not None:
        return make_inputs(plan_specs(plan, method), seed, int_range), "pte"
    return None, "method_meta"


def describe(t: Tensor) -> Json:
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "nbytes": t.numel() * t.element_size()}


def method_inputs(meta: Any) -> List[Json]:
    """Shapes and dtypes the loaded method expects, from the runtime's MethodMeta."""
    expected = []
    for i in range(meta.num_inputs()):
        ti = meta.input_tensor_meta(i)
        expected.append({"shape": list(ti.sizes()), "dtype": SCALAR_TYPES.get(ti.dtype(), str(ti.dtype()))})
    return expected


def check_inputs(inputs: Sequence[Tensor], expected: List[Json], plan: Optional[Json], method: str) -> List[str]:
    """Raise input_error when the inputs cannot fit the method; return warnings for shapes that only a dynamic
    input accepts."""
    if len(inputs) != len(expected):
        raise MeasureError("input_error", "method %s takes %d inputs, %d given" % (method, len(expected), len(inputs)),
                           expected=expected)
    warnings = []
    for i, (t, m) in enumerate(zip(inputs, expected)):
        d = describe(t)
        if d["dtype"] != m["dtype"]:
            raise MeasureError("input_error",
                               "input %d: dtype %s given, the method expects %s" % (i, d["dtype"], m["dtype"]),
                               expected=expected)
        static = plan is not None and i < len(plan["inputs"]) and plan["inputs"][i].get("shape_dynamism") == "static"
        if d["shape"] != m["shape"] and static:
            raise MeasureError("input_error", "input %d: shape %s given, the method's input is static with shape %s"
                               % (i, d["shape"], m["shape"]), expected=expected)
        if d["shape"] != m["shape"]:
            warnings.append("input %d: shape %s differs from the planned shape %s (fine only for a dynamic shape)"
                            % (i, d["shape"], m["shape"]))
    return warnings

