"""The Python API: one function per np command. Functions return records and raise NpError; they never print."""

from np_optimizer.api.evaluate import dataset_info, datasets_add, evaluate
from np_optimizer.api.experiments import (
    experiment_info,
    experiments_create,
    experiments_detail,
    experiments_list,
    validate,
)
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
from np_optimizer.api.run import run
from np_optimizer.api.status import export, status

__all__ = [
    "dataset_info",
    "datasets_add",
    "evaluate",
    "devices_list",
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
    "status",
    "validate",
    "workspace_init",
]
