"""The one codec of the records: `to_dict` (JSON-ready, tuples as lists, paths as strings) and `from_dict`
(nested records, tuples of records and paths rebuilt from the field types; unknown keys ignored)."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from pathlib import Path, PurePath
from typing import Any, TypeVar

__all__ = ["SCHEMA_VERSION", "to_dict", "from_dict"]

SCHEMA_VERSION = 1
T = TypeVar("T")


def to_dict(record: Any) -> dict[str, Any]:
    """A JSON-ready dict of a record (tuples become lists)."""
    return typing.cast(dict[str, Any], _plain(dataclasses.asdict(record)))


def _plain(value: Any) -> Any:
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    """The field types of a record, resolved once per class."""
    return typing.get_type_hints(cls)


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a record (and nested records and tuples of records) from `to_dict` output; unknown keys are ignored."""
    hints = _hints(typing.cast(type, cls))
    kwargs = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data and f.init:
            kwargs[f.name] = _coerce(hints[f.name], data[f.name])
    return cls(**kwargs)


def _coerce(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(arg, value)
            except (TypeError, KeyError, ValueError):
                continue
        return value
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return from_dict(hint, value)  # type: ignore[arg-type]
    if hint is Path and isinstance(value, str):
        return Path(value)
    if origin is tuple and isinstance(value, list):
        inner = args[0] if args else Any
        return tuple(_coerce(inner, v) for v in value)
    if dataclasses.is_dataclass(hint) and not isinstance(value, dict):
        raise TypeError(f"expected a mapping for {hint}")
    return value
