"""API: workspace init, projects, built-in models and the device catalogue."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from np_optimizer.devices import DEVICES, Device, find_device
from np_optimizer.errors import ConfigError, NotFoundError, UsageError
from np_optimizer.files import write_json, write_text
from np_optimizer.models.catalog import BUILTIN_MODELS, BuiltinModel
from np_optimizer.models.source import ModelSpec, copy_model_into
from np_optimizer.records import ProjectRecord, WorkspaceInitResult, from_dict, to_dict
from np_optimizer.samples import SAMPLE_PROJECTS
from np_optimizer.workspace import (
    PROJECT_FILE,
    Project,
    Workspace,
    check_project_name,
    find_workspace,
    resolve_project,
    utc_now,
)

__all__ = ["workspace_init", "projects_create", "projects_list", "project_info", "models_list", "devices_list"]

_CALIBRATION_SUFFIXES = {".npy", ".pt", ".png", ".jpg", ".jpeg", ".bmp"}


def workspace_init(directory: Path | None = None) -> WorkspaceInitResult:
    """Create a workspace (default: the current directory) with the ready sample projects.

    Existing projects are left as they are, so running it twice is safe.
    """
    from np_optimizer.api.experiments import experiments_create

    root = (directory or Path.cwd()).resolve()
    existed = (root / "np-workspace.json").exists()
    outer = None if existed else find_workspace(root.parent)
    if outer is not None:  # discovery takes the nearest np-workspace.json: a nested one would hide the outer's projects
        raise ConfigError(f"{root} is inside the workspace {outer.root}; np does not make a workspace inside another.",
                          hint=f"Use the workspace {outer.root} (np projects create adds a project to it), or pick a "
                               "folder outside it.", code="NP-WS-400")
    workspace = Workspace.create(root)
    created, skipped = [], []
    for sample in SAMPLE_PROJECTS:
        if (workspace.root / sample.name / PROJECT_FILE).is_file():
            skipped.append(sample.name)
            continue
        projects_create(name=sample.name, model=sample.model, device=sample.device, cwd=workspace.root)
        record = experiments_create(steps=",".join(sample.steps), name="experiment_01", project=sample.name,
                                    cwd=workspace.root)
        if sample.evaluation_dataset or sample.calibration:
            from np_optimizer.evaluate.sample import add_sample_data

            add_sample_data(Project(workspace.root / sample.name), Path(record.path), sample)
        if sample.sweep:
            write_text(workspace.root / sample.name / "sweep.yaml", sample.sweep)
        created.append(sample.name)
    return WorkspaceInitResult(root=str(workspace.root), created=not existed, projects=tuple(created),
                               skipped=tuple(skipped))


def _copy_calibration(source: str, spec: ModelSpec, project_root: Path) -> str:
    """Copy the dataset's samples into the project once every one of them loads and fits the model's example inputs:
    a dataset that does not fit is a configuration error now (exit 3, naming the user's file), not a failed run."""
    folder = Path(source)
    if not folder.is_dir():
        raise NotFoundError(f"Calibration dataset {folder} is not a folder.",
                            hint="Pass a folder of .npy/.pt tensors or images.", code="NP-DAT-404")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in _CALIBRATION_SUFFIXES)
    if not files:
        raise ConfigError(f"Calibration dataset {folder} holds no .npy, .pt or image files.",
                          hint="Put one sample per file: .npy/.pt tensors shaped like the model input, or images.",
                          code="NP-DAT-422")
    _check_calibration(spec, project_root, folder)
    target = project_root / "data" / "calibration"
    for path in files:  # the samples np reads, links followed to their files; linked folders are not walked (loops)
        destination = target / path.relative_to(folder)
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(path, destination)
        except OSError as exc:
            raise ConfigError(f"Calibration file {path} cannot be copied into the project: {exc.strerror or exc}.",
                              hint="Pass a folder of readable sample files.", code="NP-DAT-422") from None
    return str(target.relative_to(project_root))


def _check_calibration(spec: ModelSpec, root: Path, folder: Path) -> None:
    """Every sample of `folder` loads and fits the example inputs of the model copied into `root`, or ConfigError
    (NP-DAT-422) naming the first that does not (torch loads here, only for a project with a dataset)."""
    from np_optimizer.models.inputs import check_dataset
    from np_optimizer.models.source import load_model

    check_dataset(folder, load_model(spec, root).example_inputs)


def projects_create(*, name: str, model: str, device: str, runtime: str | None = None, backend: str | None = None,
                    calibration_dataset: str | None = None, evaluation_dataset: str | None = None,
                    cwd: Path | None = None, factory_timeout: float | None = None) -> ProjectRecord:
    """Create a project folder in the workspace with its own copy of the model (and calibration data).

    A factory (file.py:factory, package.module:factory) is called once in a process of its own, stopped after
    `factory_timeout` seconds (default: $NP_FACTORY_TIMEOUT, else 120); its failure fails the create, which leaves
    no folder behind."""
    cwd = cwd or Path.cwd()
    check_project_name(name)
    workspace = find_workspace(cwd)
    if workspace is None:
        raise NotFoundError("No workspace here (no np-workspace.json in this folder or above).",
                            hint="Run `np workspace init` first, or cd into a workspace.", code="NP-WS-404")
    workspace.check()
    target = find_device(device, runtime, backend)
    root = workspace.root / name
    if root.exists() or root.is_symlink():
        raise UsageError(f"Project folder {root} already exists.", hint="Pick another --name, or remove that folder.",
                         code="NP-PRJ-409")
    root.mkdir(parents=True)
    try:
        spec = copy_model_into(model, root, factory_timeout=factory_timeout)
        calibration = _copy_calibration(calibration_dataset, spec, root) if calibration_dataset else None
        info = {
            "schema_version": 1, "name": name, "device": target.name, "runtime": target.runtime,
            "backend": target.backend, "model": to_dict(spec), "calibration_dataset": calibration,
            "created_at": utc_now(),
        }
        if evaluation_dataset:  # checked against the model and copied, like the calibration data
            from np_optimizer.evaluate.attach import prepare_dataset

            info["evaluation_dataset"] = prepare_dataset(evaluation_dataset, spec, root)
        write_json(root / PROJECT_FILE, info)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)  # a failed create leaves nothing half-made
        raise
    return _record(Project(root))


def _record(project: Project) -> ProjectRecord:
    info = project.info  # ConfigError naming project.json when it is not a project record
    return ProjectRecord(
        name=project.name, path=str(project.root), device=info["device"], runtime=str(info.get("runtime", "")),
        backend=str(info.get("backend", "")), model=from_dict(ModelSpec, info["model"]),
        calibration_dataset=_optional_text(info.get("calibration_dataset")),
        created_at=str(info.get("created_at", "")), experiments=tuple(e.name for e in project.experiments()),
    )


def _optional_text(value: object) -> str | None:
    return None if value is None else str(value)


def projects_list(*, cwd: Path | None = None) -> list[ProjectRecord]:
    workspace = find_workspace(cwd or Path.cwd())
    if workspace is None:
        raise NotFoundError("No workspace here.", hint="Run `np workspace init`, or cd into a workspace.",
                            code="NP-WS-404")
    records = []
    for project in workspace.projects():
        try:
            records.append(_record(project))
        except ConfigError as exc:  # one damaged project must not hide the others
            logging.getLogger("np.Projects").warning(f"{exc.message} It is left out of this list. {exc.hint or ''}")
    return records


def project_info(name: str | None = None, *, cwd: Path | None = None) -> ProjectRecord:
    return _record(resolve_project(name, cwd or Path.cwd()))


def models_list() -> list[BuiltinModel]:
    return list(BUILTIN_MODELS)


def devices_list(*, filters: dict[str, str] | None = None, sort: str | None = None) -> list[Device]:
    """The catalogue, filtered by exact `key=value` matches (device, runtime, backend, method, mlia_target)."""
    keys: dict[str, Callable[[Device], str]] = {
        "device": lambda d: d.name, "runtime": lambda d: d.runtime, "backend": lambda d: d.backend,
        "mlia_target": lambda d: d.mlia_target or "", "method": lambda d: ",".join(d.method_names)}
    rows = list(DEVICES)
    for key, value in (filters or {}).items():
        getter = keys.get(key)
        if getter is None:
            raise UsageError(f"Unknown filter key '{key}'.", hint=f"Filter keys: {', '.join(keys)}.", code="NP-DEV-410")
        if key == "method":
            rows = [d for d in rows if value.lower() in d.method_names]
        else:
            rows = [d for d in rows if getter(d).lower() == value.lower()]
    if sort:
        field_name, _, direction = sort.partition(":")
        if field_name not in keys or direction not in ("", "asc", "desc"):
            raise UsageError(f"Invalid sort '{sort}'.", hint="Use field[:asc|desc] with field in device, runtime, backend.",
                             code="NP-DEV-410")
        rows.sort(key=keys[field_name], reverse=direction == "desc")
    return rows
