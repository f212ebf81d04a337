"""The frozen records share ==, hash() and repr() (records/base.py) instead of having dataclasses compile them per
class: they stay cheap to define (np report and np status define some fifty at start) and behave as the generated
methods would."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from typing import Any

import pytest

import np_optimizer.records as records
from np_optimizer.records.base import Record
from tests.records.test_records_roundtrip import build

# every frozen dataclass defined in np_optimizer.records, public or a part of one
FROZEN = {f"{cls.__module__.rsplit('.', 1)[1]}.{cls.__name__}": cls
          for info in pkgutil.iter_modules(records.__path__)
          for cls in vars(importlib.import_module(f"np_optimizer.records.{info.name}")).values()
          if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__.endswith(f".{info.name}")
          and cls.__dataclass_params__.frozen}


def _twin(cls: type) -> type:
    """The same fields declared with a plain @dataclass(frozen=True): what the record's methods must match."""
    fields = [(f.name, f.type, dataclasses.field(default=f.default, default_factory=f.default_factory,
                                                 init=f.init, repr=f.repr, hash=f.hash, compare=f.compare,
                                                 metadata=f.metadata))
              for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass(cls.__qualname__, fields, frozen=True)


def _values(record: Any) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.init}


def test_the_records_are_found() -> None:
    assert {"results.JobRecord", "parts.ErrorRecord", "index.ReportIndex", "state.StatusRecord"} <= set(FROZEN)


@pytest.mark.parametrize("name", [n for n in FROZEN if n != "layers.LayerKey"])  # LayerKey: order=True, hot in sets
def test_a_frozen_record_is_a_record_and_compiles_no_eq_hash_or_repr(name: str) -> None:
    cls = FROZEN[name]
    assert issubclass(cls, Record), f"declare {name} @dataclass(frozen=True, eq=False, repr=False) on Record"
    assert not {"__eq__", "__hash__", "__repr__"} & set(vars(cls)), name


@pytest.mark.parametrize("name", FROZEN)
def test_eq_hash_and_repr_are_those_dataclasses_would_write(name: str) -> None:
    cls = FROZEN[name]
    record = build(cls)
    twin = _twin(cls)(**_values(record))
    assert repr(record) == repr(twin)
    same = cls(**_values(record))
    assert record == same and not record != same and record != twin  # another class is never equal
    try:
        assert hash(record) == hash(same) == hash(twin)
    except TypeError:  # a field that is a dict or a list: unhashable, as the generated __hash__ makes it
        with pytest.raises(TypeError):
            hash(twin)
    for f in dataclasses.fields(cls):  # each field changed in turn: equal again only where it is not compared
        if f.init:
            changed = object()
            other, twin_other = (dataclasses.replace(r, **{f.name: changed}) for r in (record, twin))
            assert (record == other) == (twin == twin_other) == (not f.compare), f.name
