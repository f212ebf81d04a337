"""Render docs/errors.md from the error table (`python -m np_optimizer.docgen.errors > docs/errors.md`, or `make docs`).

A test regenerates it and fails when the committed file differs, so the documented codes never drift from CODES.
"""

from __future__ import annotations

from np_optimizer.errors import (
    CODES,
    EXIT_BUDGET,
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_NETWORK,
    EXIT_USAGE,
    EXIT_VALIDATION,
)

__all__ = ["render_errors"]

_EXITS = {
    EXIT_FAILED: "a run or measurement failed, or an internal error",
    EXIT_USAGE: "usage error (bad flags or argument forms)",
    EXIT_CONFIG: "configuration error (workspace, project, model, device, dataset, result files)",
    EXIT_NETWORK: "network error: a remote device could not be reached",
    EXIT_VALIDATION: "run.yaml / run.detail.yaml violations; nothing was run",
    EXIT_BUDGET: "a budget failed (np report --check, np run --check); the report was printed",
}


def render_errors() -> str:
    lines = ["# Error codes", "", "Generated from `CODES` in `src/np_optimizer/errors.py` by `make docs`; do not edit "
             "by hand.", "", "Every error np prints carries one of these codes, a message and a hint (the next "
             "step); `--json` prints them as `{\"error\": true, \"code\", \"message\", \"hint\", \"exit_code\"}`. A "
             "failed profile round or job stores the same `{code, message, hint}`. A command whose rounds failed "
             "exits 4 when every failure is a network failure, else 1.", "", "## Exit codes", "",
             "| Exit | Meaning |", "|---|---|", "| 0 | success |"]
    lines += [f"| {code} | {text} |" for code, text in sorted(_EXITS.items())]
    lines += ["| 130 | interrupted (Ctrl+C); results written so far are kept |", "", "## Codes", "",
              "| Code | Exit | Meaning |", "|---|---|---|"]
    lines += [f"| `{c.code}` | {c.exit_code} | {c.meaning} |" for c in sorted(CODES.values(), key=lambda c: c.code)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_errors(), end="")
