"""The one codec of the records: `to_dict` (JSON-ready: tuples as lists, paths as strings) and `from_dict` (nested
records, tuples and lists of records and paths rebuilt from the field types; unknown keys ignored).

A record says how its JSON differs from its fields, declaratively, instead of writing its own to_dict:
- `field(metadata=json_name("budget"))`: the field's JSON key;
- `field(metadata=NOT_WRITTEN)`: a field the JSON leaves out (kept in memory only);
- `field(default=None, metadata=OMITTED_WHEN_NONE)`: a key the JSON has only when the field is set (files whose
  shape had the key only sometimes keep that shape);
- `__json_computed__ = {"status": "status"}`: JSON keys written from properties (read back by nobody);
- `__json_order__ = ("experiment", "reused", ...)`: the order of the keys where the --json shape pins it;
- `field(metadata=PRESENT)` on a `frozenset[str] | None` field: the keys the record was read with (from_dict sets
  it), and the only keys to_dict writes when it is set. For a record whose files hold a subset of its keys (the
  compile summary of a round, a cache miss without saved_s): it re-encodes with the keys it was read with.

A status field is a StrEnum (records/status.py): written as its value, read back as the member (a spelling the enum
does not know is kept as the string, so a file of another np version still reads).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from pathlib import Path, PurePath
from typing import Any, TypeAlias, TypeVar, Union

__all__ = ["SCHEMA_VERSION", "to_dict", "from_dict", "field_types", "json_name", "NOT_WRITTEN", "OMITTED_WHEN_NONE", "PRESENT",
           "JsonValue", "as_object", "as_list"]

SCHEMA_VERSION = 1
# A value JSON holds, for the parts of a record whose keys are open-ended by nature (a tool's extras, a step's options)
JsonValue: TypeAlias = Union[str, int, float, bool, None, list["JsonValue"], dict[str, "JsonValue"]]
T = TypeVar("T")


def as_object(value: JsonValue) -> dict[str, JsonValue]:
    """A JSON value read where an object is expected: the object, or {} for anything else (a missing key)."""
    return value if isinstance(value, dict) else {}


def as_list(value: JsonValue) -> list[JsonValue]:
    """A JSON value read where an array is expected: the array, or [] for anything else (a missing key)."""
    return value if isinstance(value, list) else []

_KEY = "np_json_key"
NOT_WRITTEN: dict[str, Any] = {_KEY: None}
_OMIT_NONE = "np_json_omit_none"
OMITTED_WHEN_NONE: dict[str, Any] = {_OMIT_NONE: True}
_PRESENT = "np_json_present"
PRESENT: dict[str, Any] = {_KEY: None, _PRESENT: True}


@functools.lru_cache(maxsize=None)
def _present_field(cls: type) -> str | None:
    """The name of the record's PRESENT field, if it has one."""
    return next((f.name for f in dataclasses.fields(cls) if f.metadata.get(_PRESENT)), None)


def json_name(key: str) -> dict[str, Any]:
    """Field metadata: write (and read) this field under `key`."""
    return {_KEY: key}


def _key(f: dataclasses.Field[Any]) -> str | None:
    """The field's JSON key, or None for a field the JSON leaves out."""
    return typing.cast("str | None", f.metadata.get(_KEY, f.name))


def to_dict(record: Any) -> dict[str, Any]:
    """A JSON-ready dict of a record."""
    return typing.cast(dict[str, Any], _plain(record))


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        present_field = _present_field(type(value))
        present = getattr(value, present_field) if present_field else None
        for f in dataclasses.fields(value):
            key = _key(f)
            field_value = getattr(value, f.name)
            if key is not None and (present is None or key in present) \
                    and not (field_value is None and f.metadata.get(_OMIT_NONE)):
                out[key] = _plain(field_value)
        for key, attribute in getattr(value, "__json_computed__", {}).items():
            out[key] = _plain(getattr(value, attribute))
        order = getattr(value, "__json_order__", ())
        return {**{k: out[k] for k in order if k in out}, **out} if order else out
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@functools.lru_cache(maxsize=None)
def field_types(cls: type) -> dict[str, Any]:
    """The field types of a record, resolved once per class in a process (resolving compiles each annotation string;
    the codec and the store's shape check share this)."""
    return typing.get_type_hints(cls)


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a record (and nested records and tuples of records) from `to_dict` output; unknown keys are ignored."""
    reads, present_field, keys = _reading(typing.cast(type, cls))
    kwargs = {name: _coerce(hint, data[key]) for name, key, hint in reads if key in data}
    if present_field:
        kwargs[present_field] = frozenset(k for k in keys if k in data)
    return cls(**kwargs)


@functools.lru_cache(maxsize=None)
def _reading(cls: type) -> tuple[tuple[tuple[str, str, Any], ...], str | None, tuple[str, ...]]:
    """How from_dict reads a record, worked out once per class: (field, JSON key, type) of each field it sets, the
    PRESENT field's name, and every JSON key of the record."""
    hints = field_types(cls)
    keyed = [(f, _key(f)) for f in dataclasses.fields(cls)]
    return (tuple((f.name, key, hints[f.name]) for f, key in keyed if key is not None and f.init),
            _present_field(cls), tuple(key for _, key in keyed if key is not None))


_UNION, _RECORD, _PATH, _ENUM, _SEQUENCE, _MAPPING, _AS_IS = range(7)


@functools.lru_cache(maxsize=None)
def _kind(hint: Any) -> tuple[int, Any]:
    """How _coerce rebuilds a value of type `hint`, worked out once per type (a job.json has hundreds of values)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _UNION, tuple(a for a in args if a is not type(None))
    if dataclasses.is_dataclass(hint):
        return _RECORD, None
    if hint is Path:
        return _PATH, None
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _ENUM, None
    if origin in (tuple, list):
        return _SEQUENCE, (origin, args[0] if args else Any)
    if origin is dict and len(args) == 2:
        return _MAPPING, args[1]
    return _AS_IS, None


def _coerce(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    try:
        kind, detail = _kind(hint)
    except TypeError:  # a type that cannot be a cache key: worked out each time
        kind, detail = _kind.__wrapped__(hint)
    if kind == _UNION:
        for arg in detail:
            try:
                return _coerce(arg, value)
            except (TypeError, KeyError, ValueError):
                continue
        return value
    if kind == _RECORD:
        if not isinstance(value, dict):
            raise TypeError(f"expected a mapping for {hint}")
        return from_dict(hint, value)
    if kind == _PATH:
        return Path(value) if isinstance(value, str) else value
    if kind == _ENUM:
        return hint._value2member_map_.get(value, value)
    if kind == _SEQUENCE and isinstance(value, list):
        origin, inner = detail
        return origin(_coerce(inner, v) for v in value)
    if kind == _MAPPING and isinstance(value, dict):
        return {k: _coerce(detail, v) for k, v in value.items()}
    return value
