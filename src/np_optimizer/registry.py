"""One generic registry for every extension point (backends, profiling methods, steps, AQ algorithms, device queues,
report views): register, get, names. A duplicate name is a bug and fails at import; an unknown name is the user's
to fix and raises an NpError that lists the registered names and the nearest match.

Entries are found by package discovery: a registry given a `package` imports each of its modules (pkgutil) the first
time it is read, so adding an entry is adding one module, with no import list to edit. A registry whose modules are
named after their entries (`module_of`) imports only the asked-for entry's module on `get`, so running one heavy entry
(an AQ algorithm) does not import the others.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable
from typing import Generic, TypeVar

from np_optimizer.errors import NpError, UnsupportedError

__all__ = ["Registry", "DuplicateEntryError", "plug_later"]

T = TypeVar("T")

# registry kind -> (package, module_of) set from above by plug_later, taken by that registry when first read
_PLUGS: dict[str, tuple[str, Callable[[str], str] | None]] = {}


def plug_later(kind: str, package: str, *, module_of: Callable[[str], str] | None = None) -> None:
    """`Registry.plug` for the registry of `kind`, done when that registry is first read: the top package plugs the
    steps into configuration's registry without importing configuration, which `np --version` never reads."""
    _PLUGS[kind] = (package, module_of)


class DuplicateEntryError(ValueError):
    """Two entries of one registry share a name: a bug in np (or in a plug-in), never the user's input."""


class Registry(Generic[T]):
    """Named entries of one kind, in registration order."""

    def __init__(self, kind: str, *, package: str | None = None, code: str = "NP-CFG-422",
                 error: Callable[..., NpError] = UnsupportedError,
                 module_of: Callable[[str], str] | None = None) -> None:
        self.kind = kind  # "backend", "profiling method" ...: the word the unknown-name message uses
        self.package = package
        self._module_of = module_of  # entry name -> the name of the module of `package` that registers it
        self._code = code
        self._error = error
        self._entries: dict[str, T] = {}
        self._discovered = package is None

    def plug(self, package: str, *, module_of: Callable[[str], str] | None = None) -> None:
        """Find this registry's entries in `package`, set from above: a registry on a low floor whose entries live
        on a higher one (the steps) is plugged in by the top package, so that its own floor never names theirs."""
        if self.package not in (None, package):
            raise DuplicateEntryError(f"{self.kind} registry already reads {self.package}, not {package}")
        self.package, self._module_of, self._discovered = package, module_of, False

    def register(self, name: str, entry: T) -> T:
        if name in self._entries:
            raise DuplicateEntryError(f"{self.kind} '{name}' is registered twice")
        self._entries[name] = entry
        return entry

    def get(self, name: str) -> T:
        entry = self.find(name)
        if entry is None:
            raise self._error(f"Unknown {self.kind} '{name}'.", hint=self.hint(name), code=self._code)
        return entry

    def find(self, name: str) -> T | None:
        self._take_plug()
        if name not in self._entries:
            self._import_module_of(name)
        if name not in self._entries:
            self._discover()
        return self._entries.get(name)

    def names(self) -> tuple[str, ...]:
        self._take_plug()
        self._discover()
        return tuple(self._entries)

    def entries(self) -> tuple[T, ...]:
        self._take_plug()
        self._discover()
        return tuple(self._entries.values())

    def hint(self, name: str) -> str:
        """The nearest registered name (if any is close) and the registered names."""
        names = list(self._entries)
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
        nearest = f"Did you mean '{close[0]}'? " if close else ""
        return f"{nearest}Registered {self.kind}s: {', '.join(names) or 'none'}."

    def _take_plug(self) -> None:
        if self.package is None and self.kind in _PLUGS:
            package, module_of = _PLUGS[self.kind]
            self.plug(package, module_of=module_of)

    def _import_module_of(self, name: str) -> None:
        if self._discovered or self._module_of is None or not self._module_of(name).isidentifier():
            return
        module = f"{self.package}.{self._module_of(name)}"
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # the module exists and lacks a dependency: a real error
                raise

    def _discover(self) -> None:
        if self._discovered or self.package is None:
            return
        self._discovered = True  # first, so that a module reading the registry while it imports does not recurse
        package = importlib.import_module(self.package)
        for module in pkgutil.iter_modules(package.__path__):
            if not module.name.startswith("_"):
                importlib.import_module(f"{self.package}.{module.name}")
