"""Write run.yaml and run.detail.yaml as a person would: defaults for the backend, comments that explain."""

from __future__ import annotations

import itertools
from typing import Any

import yaml

from np_optimizer.config.checkpoints import produced_checkpoints, step_kinds, step_short_names
from np_optimizer.config.detail_config import DetailConfig
from np_optimizer.config.run_config import RunConfig
from np_optimizer.config.steps import step_spec, step_specs
from np_optimizer.errors import UsageError

__all__ = ["STEP_COMBINATIONS", "parse_steps_option", "render_run_yaml", "render_detail_yaml"]



def _combinations() -> tuple[str, ...]:
    """What --steps accepts: any of the steps, each at most once, in pipeline order (aq | go | gq | ... | aq,go,gq)."""
    shorts = [s.short for s in step_specs()]
    return tuple(",".join(c) for n in range(1, len(shorts) + 1) for c in itertools.combinations(shorts, n))


STEP_COMBINATIONS = _combinations()

_CHECKPOINT_COMMENTS = {"INPUT_MODEL": "original model before optimization",
                        **{s.checkpoint: f"after {s.abbreviation} step" for s in step_specs()}}


def parse_steps_option(steps: str) -> list[str]:
    """`go,gq` -> ['graph_optimize', 'graph_quantize']; steps in pipeline order, each at most once."""
    short = ",".join(s.strip().lower() for s in steps.split(",") if s.strip())
    if short not in STEP_COMBINATIONS:
        raise UsageError(f"Unsupported --steps '{steps}'.", hint=f"Use one of: {' | '.join(STEP_COMBINATIONS)}.",
                         code="NP-EXP-422")
    return [step_short_names()[s] for s in short.split(",")]


def render_run_yaml(step_kinds: list[str], backend: str) -> str:
    lines = ['version: "1.0"', "", "steps:"]
    for kind in step_kinds:
        lines += step_spec(kind).run_yaml(backend)
    lines += ["", "# Checkpoints to compile and profile on the project's device; omit one to skip it.", "profile:"]
    for name in produced_checkpoints(step_kinds):
        lines.append(f"- {name:<20}# {_CHECKPOINT_COMMENTS[name]}")
    return "\n".join(lines) + "\n"


def _dump(value: dict[str, Any], indent: int) -> list[str]:
    text = yaml.safe_dump(value, sort_keys=False, default_flow_style=False)
    return [" " * indent + line for line in text.rstrip("\n").splitlines()]


def render_detail_yaml(run: RunConfig, detail: DetailConfig) -> str:
    """Every option with its value (defaults spelled out), each profile[N] labelled with its checkpoint."""
    lines = ["# Every option np uses for this experiment, defaults spelled out. Edit values; keep the keys.", "detail:"]
    lines += _dump(detail.globals, 2)
    for kind in step_kinds():
        if kind in run.step_kinds:
            lines.append(f"  {kind}[0]:")
            lines += _dump(detail.step_options(kind), 4)
    for index, name in enumerate(run.profile or ()):
        lines.append(f"  profile[{index}]:   # {name}")
        lines += _dump(detail.profile_options(index), 4)
    return "\n".join(lines) + "\n"
