"""Load and validate an experiment's run.yaml and run.detail.yaml together."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from np_optimizer.config.detail_config import DetailConfig, validate_detail
from np_optimizer.config.issues import ValidationIssue
from np_optimizer.config.run_config import RunConfig, validate_run
from np_optimizer.config.yamlfile import YamlDoc, load_yaml
from np_optimizer.devices import Device
from np_optimizer.errors import NotFoundError, ValidationFailed

__all__ = ["ExperimentConfig", "check_experiment_config", "load_experiment_config"]

RUN_FILE = "run.yaml"
DETAIL_FILE = "run.detail.yaml"


@dataclass(frozen=True)
class ExperimentConfig:
    run: RunConfig
    detail: DetailConfig
    warnings: tuple[ValidationIssue, ...] = ()


def _placed(issues: list[ValidationIssue], doc: YamlDoc | None, file: str) -> list[ValidationIssue]:
    """Attach file, line and column to issues that have a YAML location."""
    out = []
    for issue in issues:
        line, column = (issue.line, issue.column)
        if line is None and doc is not None:
            line, column = doc.mark(issue.location)
        out.append(dataclasses.replace(issue, file=issue.file or file, line=line, column=column))
    return out


def check_experiment_config(
    run_path: Path, device: Device | None, *, detail_path: Path | None = None, model: dict[str, Any] | None = None
) -> tuple[ExperimentConfig | None, list[ValidationIssue]]:
    """Every issue of run.yaml and run.detail.yaml (detail is checked only when run.yaml is valid)."""
    if not run_path.is_file():
        raise NotFoundError(f"No run.yaml at {run_path}.", hint="Create one with `np experiments create`.",
                            code="NP-EXP-404")
    run_doc, issues = load_yaml(run_path)
    if run_doc is None:
        return None, issues
    run, run_issues = validate_run(run_doc.data, device, model=model)
    issues = _placed(run_issues, run_doc, run_path.name)
    if run is None:
        return None, issues
    detail_path = detail_path or run_path.with_name(DETAIL_FILE)
    detail_data = None
    detail_doc = None
    if detail_path.exists() or detail_path.is_symlink():  # a folder or a broken link there is an issue, not "absent"
        detail_doc, syntax = load_yaml(detail_path)
        if detail_doc is None:
            return None, issues + syntax
        detail_data = detail_doc.data
    detail, detail_issues = validate_detail(detail_data, run)
    issues += _placed(detail_issues, detail_doc, detail_path.name)
    if detail is None:
        return None, issues
    return ExperimentConfig(run=run, detail=detail, warnings=tuple(i for i in issues if i.is_warning)), issues


def load_experiment_config(run_path: Path, device: Device | None, *, detail_path: Path | None = None,
                           model: dict[str, Any] | None = None) -> ExperimentConfig:
    """The validated config, or ValidationFailed carrying every issue."""
    config, issues = check_experiment_config(run_path, device, detail_path=detail_path, model=model)
    if config is None:
        files = {i.file for i in issues if not i.is_warning and i.file}
        raise ValidationFailed(issues, source=files.pop() if len(files) == 1 else run_path.name)
    return config
