"""Workspace, project and experiment folders, and finding them from the current directory.

    <workspace>/np-workspace.json
    <workspace>/devices.yaml                 SSH destinations of remote devices (optional)
    <workspace>/<project>/project.json       model, device, runtime, backend, datasets
    <workspace>/<project>/model/             the project's own copy of the model
    <workspace>/<project>/<experiment>/run.yaml [run.detail.yaml] meta.json report.json logs/ NN_<step>/
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from np_optimizer.errors import ConfigError, NotFoundError, UsageError
from np_optimizer.files import CorruptFileError, read_json, write_json
from np_optimizer.records.base import Record  # ==, hash(), repr() shared: cheaper to define
from np_optimizer.workspace.shapes import json_kind

__all__ = [
    "WORKSPACE_FILE",
    "PROJECT_FILE",
    "Workspace",
    "Project",
    "Experiment",
    "find_workspace",
    "find_project",
    "resolve_project",
    "resolve_experiment",
    "check_project_name",
    "check_experiment_name",
    "next_experiment_name",
    "utc_now",
]

WORKSPACE_FILE = "np-workspace.json"
PROJECT_FILE = "project.json"
RUN_FILE = "run.yaml"
SCHEMA_VERSION = 1

_PROJECT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{2,49}$")
_EXPERIMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,49}$")


_PROJECT_FIELDS: dict[str, type] = {"device": str, "model": dict}
_KIND_NAMES: dict[type, str] = {str: "text", dict: "a mapping"}


def _corrupt(path: Path, reason: str, hint: str, code: str) -> ConfigError:
    return ConfigError(f"{path} {reason}.", hint=hint, code=code)


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass(frozen=True, eq=False, repr=False)
class Workspace(Record):
    root: Path

    @property
    def devices_file(self) -> Path:
        return self.root / "devices.yaml"

    def projects(self) -> list[Project]:
        return sorted(
            (Project(p.parent) for p in self.root.glob(f"*/{PROJECT_FILE}")),
            key=lambda p: p.name,
        )

    @property
    def marker(self) -> Path:
        return self.root / WORKSPACE_FILE

    def check(self) -> None:
        """np-workspace.json reads back as what np wrote; ConfigError (NP-WS-500) naming the file otherwise."""
        try:
            data = read_json(self.marker)
        except CorruptFileError as exc:
            raise _corrupt(exc.path, exc.reason, "np-workspace.json only marks the folder as a workspace: restore it, "
                           "or delete it and run `np workspace init` here again (projects are kept).",
                           "NP-WS-500") from exc
        version = data.get("schema_version", SCHEMA_VERSION)
        if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
            raise ConfigError(f"{self.marker} was written by a newer np (schema {version}).",
                              hint="Upgrade np to use this workspace; the file was not changed.", code="NP-WS-500")

    @staticmethod
    def create(root: Path) -> Workspace:
        if root.exists() and not root.is_dir():
            raise ConfigError(f"{root} is a file, not a folder: np cannot make a workspace there.",
                              hint="Pass a new folder name or an existing folder; the file was not changed.",
                              code="NP-WS-400")
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file in the way further up, no permission, a read-only disk
            raise ConfigError(f"np cannot create the workspace folder {root}: {exc.strerror or exc}.",
                              hint="Pass a folder you can write to (no file in the way of its path).",
                              code="NP-WS-400") from None
        workspace = Workspace(root.resolve())
        if workspace.marker.exists() or workspace.marker.is_symlink():
            workspace.check()  # an existing workspace: never written over
        else:
            write_json(workspace.marker, {"schema_version": SCHEMA_VERSION, "created_at": utc_now()})
        return workspace


@dataclass(frozen=True, eq=False, repr=False)
class Project(Record):
    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def info(self) -> dict[str, Any]:
        """project.json; ConfigError (NP-PRJ-500) naming the file and the reason when it is not a project record
        (not UTF-8, not JSON, not an object, a required field missing or of the wrong type)."""
        path = self.root / PROJECT_FILE
        hint = "Restore project.json from a backup, or create the project again with `np projects create`."
        try:
            data = read_json(path)
        except CorruptFileError as exc:
            raise _corrupt(exc.path, exc.reason, hint, "NP-PRJ-500") from exc
        except OSError as exc:
            raise _corrupt(path, f"cannot be read: {exc.strerror or exc}", hint, "NP-PRJ-500") from None
        for key, kind in _PROJECT_FIELDS.items():
            if not isinstance(data.get(key), kind):
                got = "missing" if key not in data else f"{json_kind(data[key])}, not {_KIND_NAMES[kind]}"
                raise _corrupt(path, f"is not a project record: `{key}` is {got}", hint, "NP-PRJ-500")
        return dict(data)

    @property
    def device_name(self) -> str:
        return str(self.info["device"])

    @property
    def model_dir(self) -> Path:
        return self.root / "model"

    @property
    def workspace(self) -> Workspace | None:
        return find_workspace(self.root.parent)

    def experiments(self) -> list[Experiment]:
        return sorted((Experiment(p.parent) for p in self.root.glob(f"*/{RUN_FILE}")), key=lambda e: e.name)


@dataclass(frozen=True, eq=False, repr=False)
class Experiment(Record):
    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def run_file(self) -> Path:
        return self.root / RUN_FILE

    @property
    def detail_file(self) -> Path:
        return self.root / "run.detail.yaml"

    @property
    def report_file(self) -> Path:
        return self.root / "report.json"

    @property
    def meta_file(self) -> Path:
        return self.root / "meta.json"

    @property
    def log_file(self) -> Path:
        return self.root / "logs" / "execution.log"

    @property
    def project(self) -> Project:
        project = find_project(self.root.parent)
        if project is None:
            raise NotFoundError(
                f"Experiment {self.root} is not inside a project (no {PROJECT_FILE} above it).",
                hint="Experiments live in a project folder; create one with `np projects create`.",
                code="NP-PRJ-404",
            )
        return project


def _nearest(start: Path, marker: str) -> Path | None:
    here = start.resolve()
    for folder in (here, *here.parents):
        if (folder / marker).is_file():
            return folder
    return None


def find_workspace(start: Path) -> Workspace | None:
    root = _nearest(start, WORKSPACE_FILE)
    return Workspace(root) if root else None


def find_project(start: Path) -> Project | None:
    root = _nearest(start, PROJECT_FILE)
    return Project(root) if root else None


def resolve_project(project: str | None, cwd: Path) -> Project:
    """The project named by `--project` (a name in the workspace or a path), else the one around `cwd`."""
    if project is not None:
        candidate = Path(project)
        if (candidate / PROJECT_FILE).is_file():
            return Project(candidate.resolve())
        workspace = find_workspace(cwd)
        if workspace and (workspace.root / project / PROJECT_FILE).is_file():
            return Project(workspace.root / project)
        known = ", ".join(p.name for p in workspace.projects()) if workspace else ""
        raise NotFoundError(
            f"No project '{project}'" + (f" in workspace {workspace.root}." if workspace else "."),
            hint=(f"Projects here: {known}." if known else "Create one with `np projects create`.")
            + " See `np projects ls`.",
            code="NP-PRJ-404",
        )
    found = find_project(cwd)
    if found is None:
        raise NotFoundError(
            "Not inside a project folder.",
            hint="cd into a project, or pass --project NAME (see `np projects ls`).",
            code="NP-PRJ-404",
        )
    return found


def resolve_experiment(experiment: str | None, project: str | None, cwd: Path) -> Experiment:
    """The experiment from `-e` (a path, or a name inside the project), else the nearest folder holding run.yaml."""
    if experiment is not None:
        candidate = Path(experiment)
        if (candidate / RUN_FILE).is_file():
            return Experiment(candidate.resolve())
        if candidate.name == RUN_FILE and candidate.is_file():  # -e path/to/run.yaml: its folder
            return Experiment(candidate.parent.resolve())
        if candidate.is_file():
            raise NotFoundError(f"-e/--experiment {experiment} is a file, not an experiment folder.",
                                hint="Pass an experiment folder (one holding run.yaml) or an experiment name "
                                     "(see `np experiments ls`).", code="NP-EXP-404")
        owner = resolve_project(project, cwd) if project is not None else find_project(cwd)
        if owner and (owner.root / experiment / RUN_FILE).is_file():
            return Experiment(owner.root / experiment)
        known = ", ".join(e.name for e in owner.experiments()) if owner else ""
        raise NotFoundError(
            f"No experiment '{experiment}'" + (f" in project {owner.name}." if owner else "."),
            hint=(f"Experiments here: {known}." if known else "Create one with `np experiments create`."),
            code="NP-EXP-404",
        )
    if project is not None:
        owner = resolve_project(project, cwd)
        experiments = owner.experiments()
        if len(experiments) == 1:
            return experiments[0]
        raise UsageError(
            f"Project {owner.name} has {len(experiments)} experiments; name one.",
            hint="Pass -e/--experiment NAME (see `np experiments ls --project " + owner.name + "`).",
            code="NP-EXP-400",
        )
    root = _nearest(cwd, RUN_FILE)
    if root is None:
        raise NotFoundError(
            "No experiment here: no run.yaml in this folder or above it.",
            hint="cd into an experiment folder, or pass -e/--experiment PATH_OR_NAME.",
            code="NP-EXP-404",
        )
    return Experiment(root)


def check_project_name(name: str) -> None:
    if not _PROJECT_NAME.match(name):
        raise UsageError(
            f"Invalid project name '{name}'.",
            hint="Use 3-50 letters, digits, '_' or '-', starting with a letter or digit.",
            code="NP-PRJ-400",
        )


def check_experiment_name(name: str) -> None:
    if not _EXPERIMENT_NAME.match(name):
        raise UsageError(
            f"Invalid experiment name '{name}'.",
            hint="Use 1-50 letters, digits, '_' or '-', starting with a letter or digit.",
            code="NP-EXP-400",
        )


def next_experiment_name(project: Project) -> str:
    numbers = [
        int(m.group(1))
        for e in project.experiments()
        if (m := re.fullmatch(r"experiment_(\d+)", e.name))
    ]
    return f"experiment_{(max(numbers) + 1) if numbers else 1:02d}"
