"""`Record`: the base of the frozen records, with the `==`, `hash()` and `repr()` dataclasses would write per class.

A frozen record is declared `@dataclass(frozen=True, eq=False, repr=False)` on `Record`. dataclasses compiles each
method it writes for a class when the class is defined (six for a frozen one: about a millisecond per record, and
`np report` defines some fifty records before it reads a file); these three are the same for every record, so they
are written once here and behave as the generated ones: equal when of the same class with equal compared fields,
hashed on those fields, shown as `Name(field=value, ...)`. Records that are not frozen (mutable views) keep plain
`@dataclass` (unhashable, as dataclasses makes them). tests/records/test_records_roundtrip.py checks every record.
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib
from collections.abc import Callable
from typing import Any

__all__ = ["Record"]

# class -> (the compared fields' values, the hashed fields' values, the shown fields' names): built on first use
_ACCESS: dict[type, tuple[Callable[[Any], tuple[Any, ...]], Callable[[Any], tuple[Any, ...]], tuple[str, ...]]] = {}


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The values of `names` of an object, as a tuple (attrgetter returns a bare value for one name)."""
    if not names:
        return lambda _obj: ()
    if len(names) == 1:
        get = operator.attrgetter(names[0])
        return lambda obj: (get(obj),)
    return operator.attrgetter(*names)


def _access(cls: type) -> tuple[Callable[[Any], tuple[Any, ...]], Callable[[Any], tuple[Any, ...]], tuple[str, ...]]:
    found = _ACCESS.get(cls)
    if found is None:
        fields = dataclasses.fields(cls)
        found = (_getter(tuple(f.name for f in fields if f.compare)),
                 _getter(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))),
                 tuple(f.name for f in fields if f.repr))
        _ACCESS[cls] = found
    return found


class Record:
    """The base of np's frozen records (see the module's docstring)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        compared = _access(self.__class__)[0]
        return compared(self) == compared(other)

    def __hash__(self) -> int:
        return hash(_access(self.__class__)[1](self))

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        shown = _access(self.__class__)[2]
        return f"{self.__class__.__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in shown)})"
