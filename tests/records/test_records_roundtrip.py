"""Every public record of np_optimizer.records round-trips through JSON with the one codec: what `to_dict` writes,
`from_dict` reads back to an equal record (fields the JSON leaves out return to their defaults)."""

from __future__ import annotations

import dataclasses
import enum
import importlib
import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest

import np_optimizer.records as records
from np_optimizer.records import from_dict, to_dict
from np_optimizer.records.codec import NOT_WRITTEN, PRESENT

RECORDS = sorted(name for name in records.__all__
                 if isinstance(getattr(records, name), type) and dataclasses.is_dataclass(getattr(records, name)))


def sample(hint: Any, depth: int = 0) -> Any:
    """A value of type `hint` that JSON keeps (strings, numbers, nested records), different from every default."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return sample(next(a for a in args if a is not type(None)), depth)
    if dataclasses.is_dataclass(hint):
        return build(typing.cast(type, hint), depth + 1)
    if hint is Path:
        return Path("folder/file.pt2")
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return list(hint)[-1]
    if origin in (tuple, list):
        return origin([sample(args[0], depth)]) if args and depth < 3 else origin()
    if origin is dict:
        return {"key": sample(args[1], depth)} if args and args[1] is not Any else {"key": [1, "two", {"3": None}]}
    if hint is Any or hint is object:
        return {"any": [1.5, "x"]}
    return {str: "text", int: 7, float: 2.5, bool: True}.get(hint, "text")


def build(cls: type, depth: int = 0) -> Any:
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: sample(hints[f.name], depth) for f in dataclasses.fields(cls)
                  if f.init and f.metadata not in (NOT_WRITTEN, PRESENT)})


@pytest.mark.parametrize("name", RECORDS)
def test_record_round_trips_through_json(name: str) -> None:
    cls = getattr(records, name)
    record = build(cls)
    text = json.dumps(to_dict(record))
    assert from_dict(cls, json.loads(text)) == record


def test_every_record_is_covered() -> None:
    """The parametrisation above reads __all__: a record type added to the package is tested without more code."""
    assert {"ProfileResult", "JobRecord", "ReportRecord", "Plan", "BudgetVerdict", "LayerKey", "CompileResult"} <= \
        set(RECORDS)


def test_the_package_finds_each_name_in_its_module() -> None:
    """records/__init__ imports its names on first use (issue 35: np starts without loading every record module):
    each name of __all__ is mapped to the module that defines it."""
    assert set(records._WHERE) == set(records.__all__)
    for name, module in records._WHERE.items():
        assert getattr(importlib.import_module(f"np_optimizer.records.{module}"), name) is getattr(records, name)


def test_declared_json_shapes() -> None:
    """Renamed keys, computed keys and fields left out, as the pinned --json shapes need them."""
    key = records.LayerKey("block.conv", "Conv2d", "convolution")
    assert to_dict(key) == {"module": "block.conv", "class": "Conv2d", "family": "convolution", "key": "block.conv"}
    round_ = records.ProfileRound("e", "host", "on-device", (), requested_method="on-device")
    assert to_dict(round_) == {"experiment": "e", "device": "host", "method": "on-device", "results": [],
                               "reused": False}


def test_statuses_keep_their_spellings() -> None:
    """A status is written as the string the files always held and read back as the enum member; a spelling the enum
    does not know (a file of another np version) reads as the string, not an error."""
    from np_optimizer.records.status import CompileStatus, JobStatus, RoundStatus, TrialState
    from np_optimizer.records.sweep import SweepTrial

    job = records.JobRecord("01_graph_optimize", "graph_optimize", 1, "GRAPH_OPTIMIZE", JobStatus.IN_PROGRESS, "t0")
    data = json.loads(json.dumps(to_dict(job)))
    assert data["status"] == "in_progress" and type(data["status"]) is str
    assert from_dict(records.JobRecord, data).status is JobStatus.IN_PROGRESS
    assert from_dict(records.JobRecord, {**data, "status": "later_word"}).status == "later_word"
    assert to_dict(records.CompileResult("d", "b", None, CompileStatus.UNSUPPORTED, "", ""))["status"] == "unsupported"
    assert from_dict(SweepTrial, {"number": 0, "experiment": "e", "params": {}, "state": "complete"}).state \
        is TrialState.COMPLETE
    assert [s.value for s in RoundStatus] == ["SUCCESS", "FAILED"]
