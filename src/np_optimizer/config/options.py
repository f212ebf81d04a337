"""Option tables for run.detail.yaml and a small engine that validates values against them and spells out defaults."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Union

from np_optimizer.config.issues import L_SCHEMA, ValidationIssue, did_you_mean

__all__ = ["Opt", "Section", "check_section", "defaults_of", "merge_defaults", "LARGEST"]

# The largest magnitude any numeric option takes: far beyond every real setting, and small enough for every consumer
# (a timeout in seconds stays below threading.TIMEOUT_MAX, a seed fits numpy's 32 bits, a count fits a C int).
LARGEST = 2**32 - 1


@dataclass(frozen=True)
class Opt:
    """One option: its default, its type ("int", "number", "bool", "choice"), bounds and meaning.

    Numbers are finite (never .nan or .inf) and at most LARGEST in magnitude, whatever the option's own bounds."""

    default: Any
    kind: str
    doc: str
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    exclusive_minimum: bool = False
    also: tuple[Any, ...] = ()  # extra accepted sentinel values, e.g. -1 for "all"

    def problem(self, value: Any) -> str | None:
        """Why `value` is not acceptable, or None."""
        if value in self.also and not isinstance(value, bool):
            return None
        if self.kind == "bool":
            return None if isinstance(value, bool) else "must be true or false"
        if self.kind == "choice":
            if value in self.choices and not isinstance(value, bool):
                return None
            named = [_as_yaml(c) for c in (*self.choices, *self.also)]
            why = f"must be one of {', '.join(named[:-1])} or {named[-1]}" if len(named) > 1 else f"must be {named[0]}"
            if isinstance(value, bool) and None in self.also:  # `off`, `no`, `false`: YAML's booleans, not null
                why += " (YAML reads off, no and false as false: write null)"
            return why
        if self.kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
            return "must be an integer" + (" (or -1 for all)" if -1 in self.also else "")
        if self.kind == "number" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return "must be a number"
        if self.kind in ("int", "number"):
            if isinstance(value, float) and not math.isfinite(value):  # .nan, .inf in YAML; nan, inf on the CLI
                return "must be a finite number"
            if abs(value) > LARGEST:
                return f"must be at most {LARGEST}"
        if self.minimum is not None:
            if self.exclusive_minimum and value <= self.minimum:
                return "must be positive" if self.minimum == 0 else f"must be greater than {self.minimum}"
            if not self.exclusive_minimum and value < self.minimum:
                return f"must be at least {self.minimum:g}"
        return None


Section = dict[str, Union[Opt, "Section"]]


def check_section(
    given: Any, spec: Section, location: str, *, code_unknown: str, code_value: str
) -> list[ValidationIssue]:
    """Issues for unknown keys (with a did-you-mean hint) and bad values in `given` against `spec`."""
    if given is None:
        return []
    if not isinstance(given, dict):
        return [
            ValidationIssue(code_value, L_SCHEMA, location, f"{location} must be a mapping of options.",
                            f"Options here: {', '.join(spec)}.")
        ]
    issues: list[ValidationIssue] = []
    for key, value in given.items():
        where = f"{location}.{key}"
        opt = spec.get(str(key))
        if opt is None:
            issues.append(ValidationIssue(code_unknown, L_SCHEMA, where, f"Unknown option '{key}' in {location}.",
                                          did_you_mean(str(key), spec)))
        elif isinstance(opt, dict):
            issues += check_section(value, opt, where, code_unknown=code_unknown, code_value=code_value)
        else:
            why = opt.problem(value)
            if why:
                issues.append(ValidationIssue(code_value, L_SCHEMA, where, f"{where} {why} (got {_as_yaml(value, quote=True)}).",
                                              f"{opt.doc} Default: {_as_yaml(opt.default, quote=True)}."))
    return issues


def _as_yaml(value: Any, *, quote: bool = False) -> str:
    """A value as YAML spells it (null, true, false); strings quoted with `quote` (what the user wrote)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if quote else str(value)


def defaults_of(spec: Section) -> dict[str, Any]:
    return {k: defaults_of(v) if isinstance(v, dict) else v.default for k, v in spec.items()}


def merge_defaults(spec: Section, given: dict[str, Any] | None) -> dict[str, Any]:
    """`given` with every option of `spec` it leaves out filled from the defaults (given values win)."""
    given = given or {}
    out: dict[str, Any] = {}
    for key, opt in spec.items():
        if isinstance(opt, dict):
            out[key] = merge_defaults(opt, given.get(key) if isinstance(given.get(key), dict) else None)
        else:
            out[key] = given.get(key, opt.default)
    return out
