"""The Python API: one function per np command. Functions return records and raise NpError; they never print.

Each function is imported on first use (PEP 562), so `np report` does not pay for importing every command's module
(the evaluator, the pipeline, the profiler) at start-up."""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from np_optimizer.lazy import lazy_exports

if TYPE_CHECKING:
    from np_optimizer.api.evaluate import dataset_info, datasets_add, evaluate
    from np_optimizer.api.experiments import (
        experiment_info,
        experiments_create,
        experiments_detail,
        experiments_list,
        validate,
    )
    from np_optimizer.api.farm import devices_farm, devices_ls
    from np_optimizer.api.profile import profile
    from np_optimizer.api.projects import (
        devices_list,
        models_list,
        project_info,
        projects_create,
        projects_list,
        workspace_init,
    )
    from np_optimizer.api.report import budgets_to_check, report, write_html_report
    from np_optimizer.api.run import run, run_checked
    from np_optimizer.api.status import export, status
    from np_optimizer.api.sweep import sweep, sweep_front

# name -> the module of this package that defines it
_WHERE = {
    "dataset_info": "evaluate", "datasets_add": "evaluate", "evaluate": "evaluate",
    "devices_farm": "farm", "devices_ls": "farm", "devices_list": "projects", "models_list": "projects", "project_info": "projects", "projects_create": "projects",
    "projects_list": "projects", "workspace_init": "projects",
    "experiment_info": "experiments", "experiments_create": "experiments", "experiments_detail": "experiments",
    "experiments_list": "experiments", "validate": "experiments",
    "export": "status", "status": "status", "profile": "profile", "run": "run", "run_checked": "run",
    "report": "report", "budgets_to_check": "report", "write_html_report": "report",
    "sweep": "sweep", "sweep_front": "sweep",
}

__all__ = [
    "dataset_info",
    "datasets_add",
    "evaluate",
    "devices_farm",
    "devices_list",
    "devices_ls",
    "experiment_info",
    "experiments_create",
    "experiments_detail",
    "experiments_list",
    "export",
    "models_list",
    "project_info",
    "projects_create",
    "profile",
    "projects_list",
    "report",
    "budgets_to_check",
    "write_html_report",
    "run",
    "run_checked",
    "status",
    "sweep",
    "sweep_front",
    "validate",
    "workspace_init",
]


class _Package(types.ModuleType):
    """Importing a submodule binds it on its package (`api.profile` = the module np_optimizer.api.profile): for the
    functions named like their module (evaluate, profile, report, run, status, sweep) the package keeps the
    function."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _WHERE.get(name) == name:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__getattr__ = lazy_exports(__name__, _WHERE)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
