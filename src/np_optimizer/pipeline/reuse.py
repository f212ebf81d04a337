"""What a finished job leaves in the step cache (pipeline/step_cache.py), and the job record a reuse of it writes."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from np_optimizer.records import JobRecord, from_dict, to_dict
from np_optimizer.records.parts import Fidelity, JobOutput, StepReuse
from np_optimizer.records.status import CompileStatus, JobStatus

if TYPE_CHECKING:
    from np_optimizer.pipeline.step_cache import CachedStep
    from np_optimizer.records.compiled import CompiledCheckpoint
    from np_optimizer.workspace import Experiment

__all__ = ["storable", "entry_record", "reused_record"]


def storable(compiled: CompiledCheckpoint | None, fidelity: dict[str, Any] | None) -> bool:
    """A job whose lowering failed, or whose .pte failed to run for its fidelity, is not stored: either may be
    transient (memory, a killed tool), and the entry's fidelity would lack the .pte's figures."""
    if compiled is not None and compiled.record.status == CompileStatus.FAILED:
        return False
    return "pte_error" not in (fidelity or {})


def entry_record(done: JobRecord, parameters: dict[str, Any], fidelity: dict[str, Any] | None,
                 warnings: Sequence[str], experiment: Experiment) -> dict[str, Any]:
    """The parts of a finished job's record that a reuse takes as they are: output, changes (the module map too),
    the step's own parameters and warnings, fidelity; and where and how long it was computed. Not its compile: the
    compile cache keeps that, per device."""
    return {"step_type": done.step_type, "checkpoint": done.checkpoint,
            "output": to_dict(done.output) if done.output else None, "changes": done.changes,
            "parameters": parameters, "warnings": list(warnings), "fidelity": fidelity or {},
            "timings": {k: v for k, v in done.timings.items() if k != "compile_s"},
            "made_in": {"project": experiment.project.name, "experiment": experiment.name, "job": done.name}}


def reused_record(hit: CachedStep, record: JobRecord, job_dir: Path, experiment: Experiment) -> JobRecord:
    """The job's record (as the run started it) with the entry's parts: status reused, and where they came from."""
    stored = hit.record
    fidelity = dict(stored.get("fidelity") or {})
    layers = fidelity.get("layers")
    if isinstance(layers, dict) and isinstance(layers.get("file"), str):  # layers_snr.json, now in this job's folder
        fidelity["layers"] = {**layers, "file": os.path.relpath(job_dir / "artifacts" / Path(layers["file"]).name,
                                                                experiment.root)}
    made = stored.get("made_in") or {}
    timings = stored.get("timings") or {}
    reuse = StepReuse(key=hit.key, entry=str(hit.folder), project=made.get("project"),
                      experiment=made.get("experiment"), job=made.get("job"),
                      saved_s=round(sum(float(v) for v in timings.values()), 3))
    return replace(record, status=JobStatus.REUSED, output=from_dict(JobOutput, stored["output"]),
                   changes=dict(stored.get("changes") or {}),
                   parameters={**record.parameters, **(stored.get("parameters") or {})},
                   fidelity=from_dict(Fidelity, fidelity), warnings=tuple(stored.get("warnings") or ()),
                   reused_from=reuse)
