"""Whether parsed JSON has the shape of a record: the check every stored record passes before np uses it.

`from_dict` rebuilds a record from whatever it is given; a job.json or a cached estimate whose `status` is a list, or
whose `metrics` is a string, would rebuild and then fail far away (a format string, a sort). `shape_problem` walks the
record's type hints instead and names the first field that does not fit, so the reader can set the file aside or
treat it as a miss, with that reason, before anything uses it.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any

from np_optimizer.records.codec import field_types

__all__ = ["shape_problem", "json_kind"]

_JSON_SCALARS = {str, int, float, bool, type(None)}  # with list and dict: the arms of records.codec.JsonValue


def json_kind(value: Any) -> str:
    """`a list`, `a string`, `null`...: what a JSON value is, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _field_name(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def shape_problem(hint: Any, value: Any, where: str = "") -> str | None:
    """Why `value` (parsed JSON) cannot stand for `hint` (a record class or a field's type), or None when it can.

    Records: a mapping with every required field, each of its field's shape (unknown keys are allowed: a newer np's
    extra fields). str, int, float and bool are checked as such (a bool is not a number),
    dict[K, V] as a mapping of V, tuple[X, ...] and list[X] as a list of X, X | None also as null; Any as anything.

    Long because: one branch per kind of type hint, read best side by side.
    """
    if hint is Any or hint is object:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union and _JSON_SCALARS <= set(args) and \
            {typing.get_origin(a) for a in args} >= {list, dict}:  # records.codec.JsonValue (as get_type_hints expands
        return None  # it): parsed JSON is always JSON, no walk down its values
    label = where or "the record"
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        problems = [shape_problem(arg, value, where) for arg in args if arg is not type(None)]
        return None if any(p is None for p in problems) else problems[0]
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(value, dict):
            return f"{label} is {json_kind(value)}, not a mapping"
        hints = field_types(hint)  # resolved once per class (with the codec)
        for f in dataclasses.fields(hint):
            if not f.init:
                continue
            name = _field_name(where, f.name)
            if f.name not in value:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    return f"{name} is missing"
                continue
            problem = shape_problem(hints[f.name], value[f.name], name)
            if problem:
                return problem
        return None
    if hint is type(None):
        return None if value is None else f"{label} is {json_kind(value)}, not null"
    if hint is bool:
        return None if isinstance(value, bool) else f"{label} is {json_kind(value)}, not true/false"
    if hint is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else \
            f"{label} is {json_kind(value)}, not an integer"
    if hint is float:
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else \
            f"{label} is {json_kind(value)}, not a number"
    if hint is str or (isinstance(hint, type) and issubclass(hint, enum.Enum)):  # a status: its spelling, as text
        return None if isinstance(value, str) else f"{label} is {json_kind(value)}, not text"
    if hint is dict or origin is dict:
        if not isinstance(value, dict):
            return f"{label} is {json_kind(value)}, not a mapping"
        inner = args[1] if len(args) == 2 else Any
        for key, item in value.items():
            problem = shape_problem(inner, item, f"{label}.{key}")
            if problem:
                return problem
        return None
    if hint in (tuple, list) or origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            return f"{label} is {json_kind(value)}, not a list"
        inner = args[0] if args else Any
        for index, item in enumerate(value):
            problem = shape_problem(inner, item, f"{label}[{index}]")
            if problem:
                return problem
        return None
    return None
