"""sweep.yaml's `strategy: {mixed: ...}` block, checked like the rest of sweep.yaml (an issue per mistake, at its place,
with the nearest valid name). What the strategy does is in np_optimizer.sweep.mixed.

    strategy:
      mixed:
        candidates: [W8-A8, W8-A16]   # the formats a layer may take: the base first, the widest last
        budget: latency               # what a move costs: latency (the target's per-layer cycles or times) or size
        points: 8                     # mixed trials along the greedy order of moves (the two uniform ones on top;
                                      # under `rest: both` two per k)
        from: widest                  # the uniform trial that measures the sensitivity: widest (default) or base
        rest: both                    # the format of what no move names (adds, softmax, pools): base, widest, or
                                      # both (the default: each k over both, the front keeps what is worth it)

The formats are checked against every backend's schemes (and float) here; that the project's device has them is
checked with each trial's run.yaml, as for any sweep value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from np_optimizer.backends import all_scheme_names
from np_optimizer.backends.base import FLOAT
from np_optimizer.config.issues import L_SCHEMA, ValidationIssue, did_you_mean
from np_optimizer.config.parsing import issue

__all__ = ["mixed_strategy", "mixed_label", "MIXED_BUDGETS", "MIXED_FROM", "MIXED_REST", "MIXED_DEFAULT", "SCHEME",
           "MOVES", "MIXED"]

# a mixed trial's params (the views read them too): the uniform candidate, or MIXED with its count of moves
SCHEME, MOVES, MIXED = "mixed.scheme", "mixed.moves", "mixed"

MIXED_BUDGETS = ("latency", "size")
MIXED_FROM = ("widest", "base")  # the first is the default
MIXED_REST = ("both", *MIXED_FROM)  # the first is the default
MIXED_DEFAULT: tuple[tuple[str, ...], str, int] = (("W8-A8", "W8-A16"), "latency", 8)
_OPTIONS = ("candidates", "budget", "points", "from", "rest")
_EXAMPLE = "Example: `strategy: {mixed: {candidates: [W8-A8, W8-A16], budget: latency, points: 8}}`."


def mixed_strategy(raw: Any, issues: list[ValidationIssue]) -> tuple[tuple[str, ...], str, int, str, str]:
    """(candidates, budget, points, from, rest) of the block, the defaults where one is missing; issues for each
    mistake."""
    loc = "strategy.mixed"
    candidates, budget, points = MIXED_DEFAULT
    if raw is None:
        return candidates, budget, points, MIXED_FROM[0], MIXED_REST[0]
    if not isinstance(raw, dict):
        issues.append(issue("S044", L_SCHEMA, loc, f"mixed takes a mapping of {', '.join(_OPTIONS)}, got {raw!r}.",
                            _EXAMPLE))
        return candidates, budget, points, MIXED_FROM[0], MIXED_REST[0]
    for key in raw:
        if key not in _OPTIONS:
            issues.append(issue("S044", L_SCHEMA, f"{loc}.{key}", f"mixed has no option '{key}'.",
                                did_you_mean(str(key), _OPTIONS)))
    candidates = _candidates(raw.get("candidates", list(candidates)), f"{loc}.candidates", issues)
    budget = _choice(raw, "budget", MIXED_BUDGETS, loc, issues, "S045",
                     lambda got: f"Unknown budget {got!r}: a move costs latency or size.")
    points = raw.get("points", points)
    if not isinstance(points, int) or isinstance(points, bool) or not 1 <= points <= 64:
        issues.append(issue("S046", L_SCHEMA, f"{loc}.points", f"points is how many mixed trials to run (1 to 64), "
                            f"got {points!r}.", "Example: `points: 8` (the two uniform trials come on top)."))
        points = 1
    measure_from = _choice(raw, "from", MIXED_FROM, loc, issues, "S048",
                           lambda got: f"from is the uniform trial that measures the sensitivity, widest or base; "
                                       f"got {got!r}.")
    rest = _choice(raw, "rest", MIXED_REST, loc, issues, "S049",
                   lambda got: f"rest is the format of the ops no move names (the points' scheme): widest, base, or "
                               f"both (each point over each); got {got!r}.")
    return candidates, budget, points, measure_from, rest


def _choice(raw: dict[Any, Any], key: str, choices: tuple[str, ...], loc: str, issues: list[ValidationIssue],
            code: str, message: Callable[[Any], str]) -> str:
    """The block's `key`, one of `choices` (the first when it is missing); an issue with the nearest choice, and the
    first, when it is none of them."""
    value = raw.get(key, choices[0])
    if value in choices:
        return str(value)
    issues.append(issue(code, L_SCHEMA, f"{loc}.{key}", message(value), did_you_mean(str(value), choices)))
    return choices[0]


def mixed_label(rest: str | None) -> str:
    """A mixed point's `mixed.scheme` param: "mixed" when the points have one scheme, "mixed base" / "mixed widest"
    when `rest: both` runs each k over both (the two trials of one k told apart)."""
    return MIXED if rest is None else f"{MIXED} {rest}"


def _candidates(raw: Any, loc: str, issues: list[ValidationIssue]) -> tuple[str, ...]:
    known = (*all_scheme_names(), FLOAT)
    if not isinstance(raw, list) or len(raw) < 2:
        issues.append(issue("S047", L_SCHEMA, loc, f"candidates lists two or more formats, the base first, got "
                            f"{raw!r}.", _EXAMPLE))
        return MIXED_DEFAULT[0]
    out = []
    for index, fmt in enumerate(raw):
        if fmt not in known:
            issues.append(issue("S047", L_SCHEMA, f"{loc}[{index}]", f"Unknown format {fmt!r}.",
                                did_you_mean(str(fmt), known)))
        elif fmt in out:
            issues.append(issue("S047", L_SCHEMA, f"{loc}[{index}]", f"{fmt} is listed twice.", "List each once."))
        else:
            out.append(str(fmt))
    return tuple(out) if len(out) >= 2 else MIXED_DEFAULT[0]
