"""Step kinds and checkpoint names: which step produces which checkpoint, and how names resolve."""

from __future__ import annotations

from collections.abc import Sequence

from np_optimizer.config.steps import step_specs

__all__ = [
    "STEP_KINDS",
    "STEP_SHORT_NAMES",
    "CHECKPOINT_NAMES",
    "INPUT_MODEL",
    "OUTPUT_MODEL",
    "checkpoint_of_step",
    "step_of_checkpoint",
    "canonical_checkpoint",
    "resolve_checkpoint",
    "produced_checkpoints",
    "STEP_ABBREVIATIONS",
]

_SPECS = step_specs()  # the registered steps, in pipeline order (config/steps/)
# Pipeline order: a step may only follow the ones before it in this tuple.
STEP_KINDS = tuple(s.kind for s in _SPECS)
STEP_SHORT_NAMES = {s.short: s.kind for s in _SPECS}

INPUT_MODEL = "INPUT_MODEL"
OUTPUT_MODEL = "OUTPUT_MODEL"
_CHECKPOINT_OF_STEP = {s.kind: s.checkpoint for s in _SPECS}
CHECKPOINT_NAMES = (INPUT_MODEL, *_CHECKPOINT_OF_STEP.values(), OUTPUT_MODEL)
STEP_ABBREVIATIONS = {INPUT_MODEL: "input", **{s.checkpoint: s.abbreviation for s in _SPECS}, OUTPUT_MODEL: "output"}


def checkpoint_of_step(step_kind: str) -> str:
    return _CHECKPOINT_OF_STEP[step_kind]


def step_of_checkpoint(name: str) -> str | None:
    """The step kind that produces checkpoint `name` (canonical), None for INPUT_MODEL and OUTPUT_MODEL."""
    for kind, checkpoint in _CHECKPOINT_OF_STEP.items():
        if checkpoint == name:
            return kind
    return None


def canonical_checkpoint(name: str) -> str | None:
    """Upper-case a checkpoint name if it is one of the known names (names are case-insensitive)."""
    upper = str(name).strip().upper()
    return upper if upper in CHECKPOINT_NAMES else None


def resolve_checkpoint(name: str, step_kinds: Sequence[str]) -> str | None:
    """The concrete checkpoint a (canonical) name means in a run of `step_kinds`; OUTPUT_MODEL is the last step's.

    None when the run has no such checkpoint (its step is not in `steps`).
    """
    if name == INPUT_MODEL:
        return INPUT_MODEL
    if name == OUTPUT_MODEL:
        return checkpoint_of_step(step_kinds[-1]) if step_kinds else INPUT_MODEL
    kind = step_of_checkpoint(name)
    return name if kind in step_kinds else None


def produced_checkpoints(step_kinds: Sequence[str]) -> list[str]:
    """Every checkpoint a run of `step_kinds` produces, INPUT_MODEL first."""
    return [INPUT_MODEL, *(checkpoint_of_step(k) for k in step_kinds)]
