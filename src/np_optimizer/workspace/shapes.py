"""Whether parsed JSON has the shape of a record: the check every stored record passes before np uses it.

`from_dict` rebuilds a record from whatever it is given; a job.json or a cached estimate whose `status` is a list, or
whose `metrics` is a string, would rebuild and then fail far away (a format string, a sort). `shape_problem` walks the
record's type hints instead and names the first field that does not fit, so the reader can set the file aside or
treat it as a miss, with that reason, before anything uses it.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
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


_ANY, _UNION, _RECORD, _NULL, _BOOL, _INT, _FLOAT, _TEXT, _MAPPING, _LIST = range(10)
_SCALARS = {type(None): _NULL, bool: _BOOL, int: _INT, float: _FLOAT, str: _TEXT}


@functools.lru_cache(maxsize=None)
def _kind(hint: Any) -> tuple[int, Any]:
    """What shape_problem checks a value of type `hint` for, and with what, worked out once per type: a read command
    checks every field of every job.json and stored round (thousands of values of a few dozen types)."""
    if hint is Any or hint is object:
        return _ANY, None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union and _JSON_SCALARS <= set(args) and {typing.get_origin(a) for a in args} >= {list, dict}:
        return _ANY, None  # records.codec.JsonValue (as get_type_hints expands it): parsed JSON is always JSON
    if origin in (typing.Union, types.UnionType):
        return _UNION, (type(None) in args, tuple(a for a in args if a is not type(None)))
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        hints = field_types(hint)  # resolved once per class (with the codec)
        return _RECORD, tuple((f.name, hints[f.name], f.default is dataclasses.MISSING and
                               f.default_factory is dataclasses.MISSING) for f in dataclasses.fields(hint) if f.init)
    scalar = _SCALARS.get(hint) if isinstance(hint, type) else None
    if scalar is not None:
        return scalar, None
    if isinstance(hint, type) and issubclass(hint, enum.Enum):  # a status: its spelling, as text
        return _TEXT, None
    if hint is dict or origin is dict:
        return _MAPPING, args[1] if len(args) == 2 else Any
    if hint in (tuple, list) or origin in (tuple, list):
        return _LIST, args[0] if args else Any
    return _ANY, None


def shape_problem(hint: Any, value: Any, where: str = "") -> str | None:
    """Why `value` (parsed JSON) cannot stand for `hint` (a record class or a field's type), or None when it can.

    Records: a mapping with every required field, each of its field's shape (unknown keys are allowed: a newer np's
    extra fields). str, int, float and bool are checked as such (a bool is not a number),
    dict[K, V] as a mapping of V, tuple[X, ...] and list[X] as a list of X, X | None also as null; Any as anything.

    Long because: one branch per kind of type hint, read best side by side.
    """
    try:
        kind, detail = _kind(hint)
    except TypeError:  # a type that cannot be a cache key: worked out each time
        kind, detail = _kind.__wrapped__(hint)
    if kind == _ANY:
        return None
    label = where or "the record"
    if kind == _UNION:
        nullable, arms = detail
        if value is None and nullable:
            return None
        first = None
        for arm in arms:  # fits one arm: fine; else the first arm's reason
            problem = shape_problem(arm, value, where)
            if problem is None:
                return None
            first = first or problem
        return first
    if kind == _RECORD:
        if not isinstance(value, dict):
            return f"{label} is {json_kind(value)}, not a mapping"
        for name, field_hint, required in detail:
            if name not in value:
                if required:
                    return f"{_field_name(where, name)} is missing"
                continue
            problem = shape_problem(field_hint, value[name], _field_name(where, name))
            if problem:
                return problem
        return None
    if kind == _NULL:
        return None if value is None else f"{label} is {json_kind(value)}, not null"
    if kind == _BOOL:
        return None if isinstance(value, bool) else f"{label} is {json_kind(value)}, not true/false"
    if kind == _INT:
        return None if isinstance(value, int) and not isinstance(value, bool) else \
            f"{label} is {json_kind(value)}, not an integer"
    if kind == _FLOAT:
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else \
            f"{label} is {json_kind(value)}, not a number"
    if kind == _TEXT:
        return None if isinstance(value, str) else f"{label} is {json_kind(value)}, not text"
    if kind == _MAPPING:
        if not isinstance(value, dict):
            return f"{label} is {json_kind(value)}, not a mapping"
        for key, item in value.items():
            problem = shape_problem(detail, item, f"{label}.{key}")
            if problem:
                return problem
        return None
    if not isinstance(value, (list, tuple)):  # _LIST
        return f"{label} is {json_kind(value)}, not a list"
    for index, item in enumerate(value):
        problem = shape_problem(detail, item, f"{label}[{index}]")
        if problem:
            return problem
    return None
