"""Result records returned by the Python API and written to JSON: frozen dataclasses with one to_dict/from_dict pair.

Each top-level record carries `schema_version`; readers accept older versions they know and refuse newer ones.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from np_optimizer.config.issues import ValidationIssue
from np_optimizer.plan import Plan

__all__ = [
    "SCHEMA_VERSION",
    "to_dict",
    "from_dict",
    "WorkspaceInitResult",
    "ProjectRecord",
    "ExperimentRecord",
    "ValidationReport",
]

SCHEMA_VERSION = 1
T = TypeVar("T")


def to_dict(record: Any) -> dict[str, Any]:
    """A JSON-ready dict of a record (tuples become lists)."""
    return typing.cast(dict[str, Any], _plain(dataclasses.asdict(record)))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a record (and nested records and tuples of records) from `to_dict` output; unknown keys are ignored."""
    hints = typing.get_type_hints(cls)
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
    if origin is tuple and isinstance(value, list):
        inner = args[0] if args else Any
        return tuple(_coerce(inner, v) for v in value)
    if dataclasses.is_dataclass(hint) and not isinstance(value, dict):
        raise TypeError(f"expected a mapping for {hint}")
    return value


@dataclass(frozen=True)
class WorkspaceInitResult:
    root: str
    created: bool
    projects: tuple[str, ...]
    skipped: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True)
class ProjectRecord:
    name: str
    path: str
    device: str
    runtime: str
    backend: str
    model: dict[str, Any]
    calibration_dataset: str | None
    created_at: str
    experiments: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True)
class ExperimentRecord:
    name: str
    path: str
    project: str
    device: str
    steps: tuple[str, ...]
    profile: tuple[str, ...] | None
    status: str
    created_at: str | None = None
    updated_at: str | None = None
    jobs: tuple[dict[str, Any], ...] = ()
    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True)
class ValidationReport:
    experiment: str
    is_valid: bool
    issues: tuple[ValidationIssue, ...]
    plan: Plan | None = None
    schema_version: int = SCHEMA_VERSION
    notes: tuple[str, ...] = field(default_factory=tuple)
