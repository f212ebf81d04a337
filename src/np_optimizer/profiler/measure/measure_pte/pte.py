"""Read a .pte without torch: its execution plans (inputs, delegates, operators, planned memory) from the flatbuffer
(schema executorch/schema/program.fbs, file identifier ET12), and the model section of the document."""

from __future__ import annotations

import hashlib
import os
import struct
from typing import Any, Dict, List, Optional, Tuple

from .protocol import Json

# ScalarType codes of executorch/schema/scalar_type.fbs
SCALAR_TYPES: Dict[int, str] = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
    7: "float64", 11: "bool", 12: "qint8", 13: "quint8", 14: "qint32", 15: "bfloat16",
    16: "quint4x2", 17: "quint2x4", 22: "bits16", 23: "float8_e5m2", 24: "float8_e4m3fn",
    25: "float8_e5m2fnuz", 26: "float8_e4m3fnuz", 27: "uint16", 28: "uint32", 29: "uint64",
}
_VALUE_KINDS = {1: "none", 2: "int", 3: "bool", 4: "double", 6: "string"}  # EValue.val_type, 5 = Tensor
_DYNAMISM = {0: "static", 1: "dynamic_bound", 2: "dynamic_unbound"}


class _FlatBuffer:
    """Just enough of the flatbuffer wire format to walk tables, vectors and strings."""

    def __init__(self, buf: bytes) -> None:
        self.b = buf

    def u16(self, o: int) -> int:
        return int(struct.unpack_from("<H", self.b, o)[0])

    def u32(self, o: int) -> int:
        return int(struct.unpack_from("<I", self.b, o)[0])

    def i32(self, o: int) -> int:
        return int(struct.unpack_from("<i", self.b, o)[0])

    def field(self, table: int, idx: int) -> Optional[int]:
        """Position of field idx of the table at `table`, or None when absent."""
        vt = table - self.i32(table)
        vt_size = self.u16(vt)
        slot = 4 + 2 * idx
        if slot >= vt_size:
            return None
        off = self.u16(vt + slot)
        return table + off if off else None

    def ref(self, pos: int) -> int:
        return pos + self.u32(pos)

    def vec(self, table: int, idx: int) -> Tuple[int, int]:
        """(start, length) of a vector field, or (0, 0)."""
        p = self.field(table, idx)
        if p is None:
            return 0, 0
        v = self.ref(p)
        return v + 4, self.u32(v)

    def tables(self, table: int, idx: int) -> List[int]:
        start, n = self.vec(table, idx)
        return [self.ref(start + 4 * i) for i in range(n)]

    def string(self, table: int, idx: int) -> Optional[str]:
        start, n = self.vec(table, idx)
        if n == 0 and self.field(table, idx) is None:
            return None
        return bytes(self.b[start:start + n]).decode("utf-8", "replace")

    def scalars(self, table: int, idx: int, fmt: str) -> List[int]:
        start, n = self.vec(table, idx)
        return list(struct.unpack_from("<%d%s" % (n, fmt), self.b, start)) if n else []

    def scalar(self, table: int, idx: int, fmt: str, default: int = 0) -> int:
        p = self.field(table, idx)
        return int(struct.unpack_from("<" + fmt, self.b, p)[0]) if p is not None else default


def _read_flatbuffer(path: str) -> bytes:
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 8:
            raise ValueError("file too short (%d bytes) to be a .pte" % len(head))
        ident = head[4:8]
        if ident != b"ET12":
            raise ValueError("not an ExecuTorch program: file identifier %r, expected b'ET12'" % ident)
        size = None
        if head[8:12] == b"eh00":  # extended header: the flatbuffer is followed by segments (constants, delegates)
            size = struct.unpack_from("<Q", head, 16)[0]
        f.seek(0)
        return f.read(size) if size else f.read()


def _value_info(fb: _FlatBuffer, value: int) -> Json:
    vtype = fb.scalar(value, 0, "B")
    if vtype != 5:
        return {"kind": _VALUE_KINDS.get(vtype, str(vtype))}
    pos = fb.field(value, 1)
    if pos is None:
        raise ValueError("a tensor value without its tensor")
    t = fb.ref(pos)
    st = fb.scalar(t, 0, "b")
    return {"kind": "tensor", "dtype": SCALAR_TYPES.get(st, str(st)), "shape": fb.scalars(t, 2, "i"),
            "shape_dynamism": _DYNAMISM.get(fb.scalar(t, 8, "b"), "?")}


def _plan_info(fb: _FlatBuffer, plan: int) -> Json:
    # ExecutionPlan: 0 name, 1 container_meta_type, 2 values, 3 inputs, 4 outputs, 5 chains,
    # 6 operators, 7 delegates, 8 non_const_buffer_sizes, 9 non_const_buffer_device
    values = fb.tables(plan, 2)
    sizes = fb.scalars(plan, 8, "q")
    return {
        "name": fb.string(plan, 0),
        "inputs": [_value_info(fb, values[i]) for i in fb.scalars(plan, 3, "i")],
        "outputs": [_value_info(fb, values[i]) for i in fb.scalars(plan, 4, "i")],
        "operators": sorted(set("%s.%s" % (fb.string(o, 0), fb.string(o, 1) or "default")
                                for o in fb.tables(plan, 6))),
        "delegates": [fb.string(d, 0) for d in fb.tables(plan, 7)],
        "non_const_buffer_sizes": sizes,
        # index 0 is reserved (always 0), the planned buffers are sizes[1:]
        "planned_arena_bytes": sum(sizes[1:]),
    }


def read_pte_info(path: str) -> Json:
    """Execution plans of a .pte: names, inputs, delegates (backend ids), operators and
    non_const_buffer_sizes (planned memory), read from the flatbuffer without torch."""
    buf = _read_flatbuffer(path)
    fb = _FlatBuffer(buf)
    root = fb.ref(0)
    plans = [_plan_info(fb, plan) for plan in fb.tables(root, 1)]  # Program.execution_plan
    return {"program_version": fb.scalar(root, 0, "I"), "execution_plans": plans,
            "flatbuffer_bytes": len(buf)}


def find_plan(pte_info: Optional[Json], method: str) -> Optional[Json]:
    """The execution plan named `method`, if the .pte could be read and has one."""
    if not pte_info:
        return None
    plans: List[Json] = pte_info["execution_plans"]
    return next((p for p in plans if p["name"] == method), None)


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def model_section(path: str, method: str) -> Tuple[Json, Optional[Json]]:
    """The document's "model" section and the parsed .pte (None when the file is not a readable program: the
    runtime then tells why it cannot load it)."""
    model: Dict[str, Any] = {"path": path, "size_bytes": os.path.getsize(path), "method": method,
                             "sha256": _sha256(path)}
    pte_info = None
    try:
        pte_info = read_pte_info(path)
        model["pte"] = pte_info
    except Exception as e:
        model["pte_parse_error"] = "%s: %s" % (type(e).__name__, e)
    return model, pte_info
