"""The np error tree: every error np reports, with a stable code, a hint and an exit code.

    NpError                      exit 1   (root; a failed run or measurement)
    ├── UsageError               exit 2   bad flags or argument forms
    ├── ConfigError              exit 3   workspace, project, model, device or dataset set up wrongly
    │   ├── NotFoundError                 no workspace / project / experiment / checkpoint here
    │   ├── UnsupportedError              a device, scheme or method that cannot be combined
    │   ├── ModelError                    a model that cannot be loaded, traced or read
    │   └── StoreError                    a result file that is corrupt or from a newer np
    ├── NetworkError             exit 4   a remote device that cannot be reached
    │   └── DeviceUnreachableError        ssh could not connect, timed out, or broke off (kind, doc, stderr_tail)
    ├── ValidationFailed         exit 5   run.yaml / run.detail.yaml violations (carries the issues)
    └── ToolError                exit 1   torch, ExecuTorch, Vela or MLIA failed on a valid input
        ├── CompileError                  lowering a checkpoint for a device failed
        ├── EstimateError                 MLIA / Vela could not estimate (root_cause: the tool's own last words)
        ├── MeasureError                  a measurement gave no result (kind, doc, stderr_tail)
        └── TimeLimitError                a lowering or an estimate ran past its time limit and was stopped

Exit 6 has no error class: `np report --check` and `np run --check` print their report and return it when a budget
failed (NP-BDG-412 in the verdict and the JUnit file); nothing went wrong in np.

Every code np uses is a row of CODES below, with its exit code and meaning; docs/errors.md is generated from it
(`make docs`, and a test compares). A code given to an error sets its exit code from that row. Anything that is not
an NpError is a bug in np: exit 1, code NP-GEN-500, traceback in the log (and on the console with --debug).
Messages say what went wrong; hints say what to do next.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

__all__ = [
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "EXIT_CONFIG",
    "EXIT_NETWORK",
    "EXIT_VALIDATION",
    "EXIT_BUDGET",
    "EXIT_INTERRUPTED",
    "ErrorCode",
    "CODES",
    "NpError",
    "UsageError",
    "ConfigError",
    "NotFoundError",
    "UnsupportedError",
    "ModelError",
    "StoreError",
    "NetworkError",
    "DeviceUnreachableError",
    "ValidationFailed",
    "ToolError",
    "CompileError",
    "EstimateError",
    "MeasureError",
    "TimeLimitError",
    "BUG_CODE",
    "error_record",
    "failure_exit_code",
    "first_line",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CONFIG = 3
EXIT_NETWORK = 4
EXIT_VALIDATION = 5
EXIT_BUDGET = 6  # np report --check / np run --check: a budget failed
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class ErrorCode:
    code: str
    exit_code: int
    meaning: str


def _codes(*rows: tuple[str, int, str]) -> dict[str, ErrorCode]:
    return {code: ErrorCode(code, exit_code, meaning) for code, exit_code, meaning in rows}


# The one table of codes. Prefix = area: GEN general, USE usage, CFG configuration, WS workspace, PRJ project,
# EXP experiment, MDL model, DAT dataset, DEV device, VAL validation, CKP checkpoint, AQ/GQ quantize steps,
# CMP compile, PRF profiling, CPF np profile arguments, RUN measuring runtime, RPT report and result files,
# BDG budgets, NET network, TOOL tool failure.
CODES: dict[str, ErrorCode] = _codes(
    ("NP-GEN-500", EXIT_FAILED, "Internal error: a bug in np. The traceback is in logs/execution.log and, with "
                                "--debug, on the console."),
    ("NP-USE-400", EXIT_USAGE, "Bad flags or argument forms."),
    ("NP-CFG-400", EXIT_CONFIG, "Something is set up wrongly."),
    ("NP-CFG-404", EXIT_CONFIG, "Something np looked for is not there."),
    ("NP-CFG-422", EXIT_CONFIG, "A combination np does not support."),
    ("NP-WS-400", EXIT_CONFIG, "np cannot make a workspace there (a file is in the way, or the folder cannot be "
                               "created)."),
    ("NP-WS-404", EXIT_CONFIG, "No np workspace here."),
    ("NP-WS-500", EXIT_CONFIG, "np-workspace.json cannot be read (not UTF-8, not JSON, or not what np wrote)."),
    ("NP-PRJ-400", EXIT_USAGE, "A project name np cannot use."),
    ("NP-PRJ-404", EXIT_CONFIG, "No such project, or no project here."),
    ("NP-PRJ-409", EXIT_USAGE, "A project of that name exists."),
    ("NP-PRJ-500", EXIT_CONFIG, "project.json cannot be read."),
    ("NP-EXP-400", EXIT_USAGE, "An experiment name or form np cannot use."),
    ("NP-EXP-404", EXIT_CONFIG, "No such experiment, or no experiment here (or no run.yaml)."),
    ("NP-EXP-409", EXIT_USAGE, "An experiment of that name exists."),
    ("NP-EXP-412", EXIT_CONFIG, "The experiment has nothing of that kind yet (no compiled program to export)."),
    ("NP-EXP-422", EXIT_USAGE, "An unsupported --steps combination."),
    ("NP-EXP-423", EXIT_CONFIG, "Another np process (named, with its pid and start time) is running or profiling the "
                                "experiment; nothing was done."),
    ("NP-SWP-404", EXIT_CONFIG, "No sweep.yaml in the project (or the --file given is missing)."),
    ("NP-SWP-409", EXIT_USAGE, "The project's sweep already has trials (continue it with --resume, or start over by "
                               "removing its sweep/ folder), or another np sweep drives it now."),
    ("NP-SWP-422", EXIT_VALIDATION, "Every configuration of the sweep's space breaks a rule of the device or model "
                                    "(np sweep --dry-run lists them): no trial could run."),
    ("NP-SWP-412", EXIT_CONFIG, "np sweep --resume with a sweep.yaml whose space, objectives, constraints or strategy "
                                "changed since the sweep started."),
    ("NP-SWP-503", EXIT_NETWORK, "The Ray cluster cannot be reached, or its nodes run other versions of np or its "
                                 "libraries."),
    ("NP-MDL-404", EXIT_CONFIG, "The model (file, factory or built-in name) cannot be found."),
    ("NP-MDL-413", EXIT_CONFIG, "The folder of a file.py:factory holds a file or a total too big to copy into the "
                                "project (or is the workspace itself)."),
    ("NP-MDL-422", EXIT_CONFIG, "The model cannot be loaded, traced or read."),
    ("NP-MDL-500", EXIT_CONFIG, "torch.export could not export the model."),
    ("NP-MDL-501", EXIT_CONFIG, "The model needs a package that is not installed."),
    ("NP-MDL-504", EXIT_CONFIG, "The model's factory did not return within the time limit at `np projects create` "
                                "($NP_FACTORY_TIMEOUT, default 120 s)."),
    ("NP-DAT-404", EXIT_CONFIG, "The dataset folder is missing."),
    ("NP-DAT-422", EXIT_CONFIG, "The dataset's files cannot be used as model inputs."),
    ("NP-DEV-400", EXIT_CONFIG, "devices.yaml is malformed."),
    ("NP-DEV-410", EXIT_USAGE, "A bad `np devices ls --filter`."),
    ("NP-DEV-401", EXIT_FAILED, "The remote device refused the SSH key."),
    ("NP-DEV-404", EXIT_CONFIG, "Unknown device."),
    ("NP-DEV-422", EXIT_CONFIG, "The device uses another runtime or backend than the one given."),
    ("NP-DEV-424", EXIT_FAILED, "The device's Python has no ExecuTorch runtime."),
    ("NP-DEV-426", EXIT_FAILED, "The Python used for measuring was not found on the device."),
    ("NP-DEV-495", EXIT_FAILED, "The remote device's host key could not be verified."),
    ("NP-DEV-502", EXIT_NETWORK, "ssh to the device failed or broke off."),
    ("NP-DEV-503", EXIT_NETWORK, "The device is unreachable (refused, no route, unknown host)."),
    ("NP-DEV-504", EXIT_NETWORK, "The device gave no answer in time."),
    ("NP-FRM-404", EXIT_FAILED, "No place of the labgrid farm has the device's tags."),
    ("NP-FRM-502", EXIT_NETWORK, "The farm place's board cannot be reached (no NetworkService: its exporter is down), or "
                                 "labgrid dropped the reservation."),
    ("NP-FRM-503", EXIT_NETWORK, "The labgrid coordinator named in devices.yaml cannot be reached."),
    ("NP-VAL-422", EXIT_VALIDATION, "run.yaml / run.detail.yaml have violations; nothing was run."),
    ("NP-CKP-404", EXIT_CONFIG, "A checkpoint file is missing."),
    ("NP-CKP-409", EXIT_CONFIG, "A checkpoint file does not match the sha256 its job recorded."),
    ("NP-CKP-500", EXIT_CONFIG, "A checkpoint file cannot be read."),
    ("NP-AQ-422", EXIT_CONFIG, "advanced_quantize cannot take this model or these options."),
    ("NP-GQ-422", EXIT_CONFIG, "graph_quantize has no such scheme for the backend."),
    ("NP-CMP-500", EXIT_FAILED, "Lowering the checkpoint for the device failed."),
    ("NP-CMP-501", EXIT_FAILED, "No compiler for the device's backend."),
    ("NP-CMP-504", EXIT_FAILED, "Lowering the checkpoint for the device (Ethos-U: TOSA lowering, then Vela) ran past "
                                "its time limit (run.detail.yaml profile[N].time_limit) and was stopped; what finished "
                                "before it is kept."),
    ("NP-PRF-400", EXIT_CONFIG, "Unknown profiling method."),
    ("NP-PRF-409", EXIT_FAILED, "The checkpoint to profile was not produced (its step failed)."),
    ("NP-PRF-422", EXIT_CONFIG, "The method cannot profile this checkpoint on this device."),
    ("NP-PRF-424", EXIT_CONFIG, "The method needs an SSH destination in devices.yaml."),
    ("NP-PRF-500", EXIT_FAILED, "MLIA / Vela could not estimate the checkpoint."),
    ("NP-PRF-504", EXIT_FAILED, "The MLIA estimate ran past its time limit (run.detail.yaml profile[N].time_limit) and "
                                "was stopped; what finished before it is kept."),
    ("NP-CPF-404", EXIT_CONFIG, "No finished checkpoint of that name to profile."),
    ("NP-CPF-422", EXIT_USAGE, "A bad --profile-opt, or one that does not apply."),
    ("NP-RUN-404", EXIT_FAILED, "The compiled program is missing where it is measured."),
    ("NP-RUN-422", EXIT_FAILED, "The program's inputs could not be built."),
    ("NP-RUN-500", EXIT_FAILED, "The ExecuTorch runtime cannot load the program."),
    ("NP-RUN-501", EXIT_FAILED, "The measurement failed."),
    ("NP-RUN-504", EXIT_FAILED, "The measurement did not return."),
    ("NP-RPT-400", EXIT_USAGE, "A bad --sort, --filter or report option."),
    ("NP-RPT-404", EXIT_CONFIG, "No per-layer data for that checkpoint (not profiled, or profiled by an older np)."),
    ("NP-RPT-426", EXIT_CONFIG, "A result file was written by a newer np."),
    ("NP-RPT-500", EXIT_CONFIG, "A result file is corrupt."),
    ("NP-BDG-400", EXIT_USAGE, "A bad --budget (unknown metric, wrong unit, negative or non-finite value)."),
    ("NP-BDG-404", EXIT_CONFIG, "--check without budgets: run.yaml has no budgets: section and no --budget was given."),
    ("NP-BDG-412", EXIT_BUDGET, "A budget failed: a checked checkpoint is over a limit of run.yaml's budgets: or "
                                "--budget (np report --check, np run --check)."),
    ("NP-NET-503", EXIT_NETWORK, "A network failure."),
    ("NP-CCH-400", EXIT_USAGE, "A bad `np cache` option (an --older-than np cannot read, an unknown --kind)."),
    ("NP-TOOL-500", EXIT_FAILED, "torch, ExecuTorch, Vela or MLIA failed on a valid input."),
    ("NP-TOOL-504", EXIT_FAILED, "A tool ran past its time limit and was stopped."),
)

BUG_CODE = "NP-GEN-500"


class NpError(Exception):
    """Root of np's errors. `code` is stable across releases (a row of CODES); `hint` is the next step."""

    code = BUG_CODE
    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, hint: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        # What a failed round keeps besides the error (artifacts, extras, provenance, timings, warnings).
        self.context: dict[str, Any] = {}
        if code is not None:
            self.code = code
            row = CODES.get(code)
            if row is not None:
                self.exit_code = row.exit_code

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


class StoreError(ConfigError):
    """report.json / job.json that cannot be used: corrupt, or written by a newer np."""

    code = "NP-RPT-500"


class NetworkError(NpError):
    code = "NP-NET-503"
    exit_code = EXIT_NETWORK


class ToolError(NpError):
    code = "NP-TOOL-500"
    exit_code = EXIT_FAILED


class CompileError(ToolError):
    code = "NP-CMP-500"


class EstimateError(ToolError):
    code = "NP-PRF-500"

    def __init__(self, message: str, *, hint: str | None = None, code: str | None = None,
                 root_cause: str = "") -> None:
        super().__init__(message, hint=hint, code=code)
        self.root_cause = root_cause


class TimeLimitError(ToolError):
    """A watched tool run (processes.run_watched) stopped at its time limit: during which stage, after how long,
    and the option that raises the limit."""

    code = "NP-TOOL-504"

    def __init__(self, message: str, *, hint: str | None = None, code: str | None = None, stage: str = "",
                 elapsed_s: float = 0.0, limit_s: float = 0.0, option: str = "") -> None:
        super().__init__(message, hint=hint, code=code)
        self.stage = stage
        self.elapsed_s = elapsed_s
        self.limit_s = limit_s
        self.option = option


class _Measured:
    """What a failed measurement keeps besides its message: the error kind, the script's document and stderr."""

    kind: str
    doc: dict[str, Any] | None
    stderr_tail: list[str]

    def _keep(self, kind: str, doc: dict[str, Any] | None, stderr_tail: list[str] | None) -> None:
        self.kind = kind
        self.doc = doc
        self.stderr_tail = stderr_tail or []


class MeasureError(ToolError, _Measured):
    code = "NP-RUN-501"

    def __init__(self, message: str, *, hint: str | None = None, code: str | None = None, kind: str = "",
                 doc: dict[str, Any] | None = None, stderr_tail: list[str] | None = None) -> None:
        super().__init__(message, hint=hint, code=code)
        self._keep(kind, doc, stderr_tail)


class DeviceUnreachableError(NetworkError, _Measured):
    code = "NP-DEV-503"

    def __init__(self, message: str, *, hint: str | None = None, code: str | None = None, kind: str = "",
                 doc: dict[str, Any] | None = None, stderr_tail: list[str] | None = None) -> None:
        super().__init__(message, hint=hint, code=code)
        self._keep(kind, doc, stderr_tail)


class Issue(Protocol):
    """What ValidationFailed needs of a validation issue (np_optimizer.records.ValidationIssue, a floor above)."""

    @property
    def code(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def hint(self) -> str: ...
    @property
    def is_warning(self) -> bool: ...
    @property
    def where(self) -> str: ...


class ValidationFailed(NpError):
    """run.yaml or run.detail.yaml has violations; `issues` holds every one of them."""

    code = "NP-VAL-422"
    exit_code = EXIT_VALIDATION

    def __init__(self, issues: Sequence[Issue], *, source: str = "run.yaml", check: str = "np validate") -> None:
        errors = [i for i in issues if not i.is_warning]
        super().__init__(
            f"{source} has {len(errors)} violation(s); nothing was run.",
            hint=f"Fix the violations listed above, then run `{check}` again.",
        )
        self.issues = issues

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data["issues"] = [asdict(i) for i in self.issues]  # type: ignore[call-overload]
        return data


def first_line(exc: BaseException) -> str:
    """What a library's exception says in its first line (its type's name when it says nothing), for a one-line
    error at np's boundary."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def error_record(exc: BaseException) -> dict[str, Any]:
    """The {code, message, hint} a failed job or round stores: the one place a record is built from an exception.

    An exception that is not an NpError is a bug in np: it is recorded as NP-GEN-500 with its type and first line.
    """
    if isinstance(exc, NpError):
        record: dict[str, Any] = {"code": exc.code, "message": exc.message, "hint": exc.hint}
        kind = getattr(exc, "kind", "")
        if kind:
            record["kind"] = kind
        return record
    first = (str(exc).strip().splitlines() or [""])[0]
    return {"code": BUG_CODE, "message": f"Internal error: {type(exc).__name__}: {first}".rstrip(": "),
            "hint": "This is a bug in np: the traceback is in logs/execution.log (and on the console with --debug); "
                    "please report it."}


def failure_exit_code(codes: list[str]) -> int:
    """The exit code of a command whose rounds or jobs failed with `codes`: 4 when every failure is a network
    failure (the device could not be reached), else 1."""
    if codes and all(CODES.get(c, CODES[BUG_CODE]).exit_code == EXIT_NETWORK for c in codes):
        return EXIT_NETWORK
    return EXIT_FAILED if codes else EXIT_OK
