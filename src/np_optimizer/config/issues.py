"""Validation issues: each with a stable code, a level, a YAML location, a message and a hint."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from np_optimizer.records.validation import ValidationIssue

__all__ = ["ValidationIssue", "did_you_mean", "L_SYNTAX", "L_SCHEMA", "L_REFERENCE", "L_DEVICE"]

L_SYNTAX = "L1"  # the file is not YAML, or not the expected shape
L_SCHEMA = "L2"  # a key or value outside the schema
L_REFERENCE = "L3"  # a name that refers to nothing (checkpoint, step, profile index)
L_DEVICE = "HW"  # valid YAML that the project's device cannot do


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A hint naming the closest valid spelling, or listing the valid ones."""
    options = list(choices)
    close = difflib.get_close_matches(str(word).upper(), [c.upper() for c in options], n=1, cutoff=0.5)
    if close:
        match = next(c for c in options if c.upper() == close[0])
        return f"Did you mean '{match}'? Valid: {', '.join(options)}."
    return f"Valid: {', '.join(options)}."
