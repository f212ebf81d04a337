"""The np error tree: every error a user can cause, with a stable code, a hint and an exit code.

    NpError                      exit 1   (root; a failed run or measurement)
    ├── UsageError               exit 2   bad flags or argument forms
    ├── ConfigError              exit 3   workspace, project, model, device or dataset set up wrongly
    │   ├── NotFoundError                 no workspace / project / experiment / checkpoint here
    │   ├── UnsupportedError              a device, scheme or method that cannot be combined
    │   └── ModelError                    a model that cannot be loaded, traced or read
    ├── NetworkError             exit 4   a remote device that cannot be reached or logged in to
    ├── ValidationFailed         exit 5   run.yaml / run.detail.yaml violations (carries the issues)
    └── ToolError                exit 1   torch, ExecuTorch, Vela or MLIA failed on a valid input

Messages say what went wrong; hints say what to do next. The CLI renders both, never a traceback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from np_optimizer.config.issues import ValidationIssue

__all__ = [
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "EXIT_CONFIG",
    "EXIT_NETWORK",
    "EXIT_VALIDATION",
    "EXIT_INTERRUPTED",
    "NpError",
    "UsageError",
    "ConfigError",
    "NotFoundError",
    "UnsupportedError",
    "ModelError",
    "NetworkError",
    "ValidationFailed",
    "ToolError",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CONFIG = 3
EXIT_NETWORK = 4
EXIT_VALIDATION = 5
EXIT_INTERRUPTED = 130


class NpError(Exception):
    """Root of np's errors. `code` is stable across releases; `hint` is the next step."""

    code = "NP-GEN-500"
    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, hint: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if code is not None:
            self.code = code

    def to_dict(self) -> dict[str, Any]:
        return {"error": True, "code": self.code, "message": self.message, "hint": self.hint}


class UsageError(NpError):
    code = "NP-USE-400"
    exit_code = EXIT_USAGE


class ConfigError(NpError):
    code = "NP-CFG-400"
    exit_code = EXIT_CONFIG


class NotFoundError(ConfigError):
    code = "NP-CFG-404"


class UnsupportedError(ConfigError):
    code = "NP-CFG-422"


class ModelError(ConfigError):
    code = "NP-MDL-422"


class NetworkError(NpError):
    code = "NP-NET-503"
    exit_code = EXIT_NETWORK


class ToolError(NpError):
    code = "NP-TOOL-500"
    exit_code = EXIT_FAILED


class ValidationFailed(NpError):
    """run.yaml or run.detail.yaml has violations; `issues` holds every one of them."""

    code = "NP-VAL-422"
    exit_code = EXIT_VALIDATION

    def __init__(self, issues: list[ValidationIssue], *, source: str = "run.yaml") -> None:
        errors = [i for i in issues if not i.is_warning]
        super().__init__(
            f"{source} has {len(errors)} violation(s); nothing was run.",
            hint="Fix the violations listed above, then run `np validate` again.",
        )
        self.issues = issues

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data["issues"] = [i.to_dict() for i in self.issues]
        return data
