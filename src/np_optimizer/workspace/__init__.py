"""The workspace on disk: its folders (layout) and the experiment's result store (store); atomic locked files are
np_optimizer.files, a floor below.

    layout.py   workspace / project / experiment folders and finding them from the current directory
    store.py    report.json, job.json and meta.json of an experiment: their one writer (a few verbs), under one
                experiment lock; index_file.py and meta_file.py read report.json and meta.json for it
    damaged.py  damaged result files: read without writing; set aside (and restored from a copy) by writers
    run_lock.py one np run (or shared np profiles) per experiment at a time, naming a busy holder
"""

from np_optimizer.workspace.layout import (
    PROJECT_FILE,
    WORKSPACE_FILE,
    Experiment,
    Project,
    Workspace,
    check_experiment_name,
    check_project_name,
    find_project,
    find_workspace,
    next_experiment_name,
    resolve_experiment,
    resolve_project,
    utc_now,
)

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
