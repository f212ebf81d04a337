"""Step kinds and checkpoint names: which step produces which checkpoint, and how names resolve."""

from __future__ import annotations

from collections.abc import Sequence

from np_optimizer.config.steps import step_specs

__all__ = [
    "step_kinds",
    "step_short_names",
    "checkpoint_names",
    "INPUT_MODEL",
    "OUTPUT_MODEL",
    "checkpoint_of_step",
    "step_of_checkpoint",
    "canonical_checkpoint",
    "resolve_checkpoint",
    "produced_checkpoints",
    "step_abbreviations",
]

INPUT_MODEL = "INPUT_MODEL"
OUTPUT_MODEL = "OUTPUT_MODEL"

# Functions, not constants: the steps register themselves when the registry is first read, which must not happen
# while this module is being imported (a step's module imports this one).


def step_kinds() -> tuple[str, ...]:
    """Pipeline order: a step may only follow the ones before it in this tuple."""
    return tuple(s.kind for s in step_specs())


def step_short_names() -> dict[str, str]:
    """--steps abbreviation -> step kind."""
    return {s.short: s.kind for s in step_specs()}


def checkpoint_names() -> tuple[str, ...]:
    return (INPUT_MODEL, *(s.checkpoint for s in step_specs()), OUTPUT_MODEL)


def step_abbreviations() -> dict[str, str]:
    """checkpoint name -> its short label in tables."""
    return {INPUT_MODEL: "input", **{s.checkpoint: s.abbreviation for s in step_specs()}, OUTPUT_MODEL: "output"}


def _checkpoint_of_step() -> dict[str, str]:
    return {s.kind: s.checkpoint for s in step_specs()}


def checkpoint_of_step(step_kind: str) -> str:
    return _checkpoint_of_step()[step_kind]


def step_of_checkpoint(name: str) -> str | None:
    """The step kind that produces checkpoint `name` (canonical), None for INPUT_MODEL and OUTPUT_MODEL."""
    for kind, checkpoint in _checkpoint_of_step().items():
        if checkpoint == name:
            return kind
    return None


def canonical_checkpoint(name: str) -> str | None:
    """Upper-case a checkpoint name if it is one of the known names (names are case-insensitive)."""
    upper = str(name).strip().upper()
    return upper if upper in checkpoint_names() else None


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
