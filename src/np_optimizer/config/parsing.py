"""Small helpers shared by the run.yaml parsers: issues, name matching, a step's parameter mapping."""

from __future__ import annotations

from typing import Any

from np_optimizer.config.issues import L_SCHEMA, ValidationIssue, did_you_mean

__all__ = ["issue", "match", "step_params", "unknown_keys"]


def issue(code: str, level: str, loc: str, msg: str, hint: str = "", *, warning: bool = False) -> ValidationIssue:
    return ValidationIssue(code, level, loc, msg, hint, is_warning=warning)


def match(value: Any, choices: tuple[str, ...]) -> str | None:
    """Case-insensitive match of a scheme or algorithm name to its canonical spelling."""
    if not isinstance(value, str):
        return None
    return next((c for c in choices if c.lower() == value.strip().lower()), None)


def step_params(raw: Any, loc: str, kind: str, allowed: tuple[str, ...],
                issues: list[ValidationIssue]) -> tuple[dict[str, Any] | None, str]:
    """The one parameter mapping of a step (`- graph_quantize: [ {scheme: ...} ]` or a bare mapping), its unknown
    keys reported, and the location its parameters are reported at (`steps[1].graph_quantize[0]`)."""
    if isinstance(raw, list):
        if len(raw) != 1 or not isinstance(raw[0], dict):
            issues.append(issue("R015", L_SCHEMA, loc, f"{kind} takes exactly one parameter mapping, got {len(raw)} "
                                "item(s).", f"Write `- {kind}:` followed by one `- scheme: ...` entry."))
            return None, loc
        params, ploc = raw[0], f"{loc}[0]"
    elif isinstance(raw, dict):
        params, ploc = raw, loc
    else:
        issues.append(issue("R015", L_SCHEMA, loc, f"{kind} needs parameters (scheme, ...), got {raw!r}.",
                            f"Write `- {kind}:` followed by `  - scheme: W8-A8`."))
        return None, loc
    unknown_keys(params, allowed, ploc, issues)
    return params, ploc


def unknown_keys(params: dict[str, Any], allowed: tuple[str, ...], loc: str, issues: list[ValidationIssue]) -> None:
    for key in params:
        if key not in allowed:
            issues.append(issue("R016", L_SCHEMA, f"{loc}.{key}", f"Unknown parameter '{key}'.",
                                did_you_mean(str(key), allowed)))
