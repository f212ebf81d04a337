"""Run one pipeline job: produce a checkpoint, save and verify it, compile it for the device, measure its fidelity,
and record all of it in job.json and report.json. Finished jobs are reused under --retry when nothing changed."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from np_optimizer.compile import Watch, compile_for, reuse_note
from np_optimizer.errors import ToolError
from np_optimizer.layers.lineage import compose
from np_optimizer.models.source import sha256_file
from np_optimizer.pipeline.context import CheckpointRef, RunContext, StepOutcome
from np_optimizer.pipeline.reuse import entry_record, reused_record, storable
from np_optimizer.pipeline.step_cache import StepCache, place_files
from np_optimizer.records import JobRecord, from_dict
from np_optimizer.records.codec import JsonValue
from np_optimizer.records.compiled import CompiledCheckpoint, ProducedCheckpoint, ProgramStats
from np_optimizer.records.parts import NO_COMPILE, ErrorRecord, Fidelity, JobInput, JobOutput
from np_optimizer.records.status import CompileStatus, JobStatus
from np_optimizer.versions import np_version, tool_version
from np_optimizer.workspace import utc_now
from np_optimizer.workspace.store import ExperimentStore

__all__ = ["config_hash", "JobRunner"]

_T = TypeVar("_T")

CHECKPOINT_FILE = "model.pt2"


def config_hash(payload: dict[str, Any]) -> str:
    """What a job's output depends on besides its input checkpoint; equal hashes mean --retry may reuse it."""
    full = {**payload, "np": np_version(), "torch": tool_version("torch"), "torchao": tool_version("torchao"),
            "executorch": tool_version("executorch")}
    return hashlib.sha256(json.dumps(full, sort_keys=True, default=str).encode()).hexdigest()


class JobRunner:
    def __init__(self, run: RunContext, store: ExperimentStore, *, retry: bool, log: logging.Logger,
                 progress: Callable[[str], None], lowered: Collection[str] | None = None,
                 steps: StepCache | None = None, force: bool = False) -> None:
        self.run = run
        self.store = store
        self.retry = retry
        self.steps = steps  # the step cache (None: not used); with `force` its entries are not read, only written
        self.force = force
        self.log = log
        self.progress = progress
        self.lowered = lowered  # checkpoints lowered in the run (None: all); see plan.lowered_in_run
        self.programs: dict[str, Any] = {}  # job name -> its checkpoint in memory, so the next step need not reload it

    def _lowers(self, checkpoint: str) -> bool:
        """Whether this run lowers `checkpoint` for its device (plan.lowered_in_run; None: every checkpoint)."""
        return self.lowered is None or checkpoint in self.lowered

    def program_of(self, ref: CheckpointRef) -> Any:
        """The checkpoint's ExportedProgram: the one this run made (and saved), else the file."""
        from np_optimizer.graph.program_io import load_program

        program = self.programs.get(ref.job)
        return program if program is not None else load_program(ref.path)

    def reusable(self, name: str, checkpoint: str, hash_: str) -> CheckpointRef | None:
        """The finished output of job `name` if --retry is on and its inputs and config are unchanged."""
        if not self.retry:
            return None
        record = self.store.read_job(name)
        if record is None or not record.status.done or record.config_hash != hash_:
            return None
        path = self.store.job_dir(name) / "artifacts" / CHECKPOINT_FILE
        if record.output is None or not path.is_file() or sha256_file(path) != record.output.sha256:
            return None
        return CheckpointRef(checkpoint, name, path, record.output.sha256)

    def run_job(self, *, name: str, step_type: str, index: int, checkpoint: str, input_ref: CheckpointRef | None,
                parameters: dict[str, Any], hash_: str,
                produce: Callable[[Path], StepOutcome], reuse_key: str | None = None) -> ProducedCheckpoint:
        """One job: reuse it (--retry), take it from the step cache (`reuse_key`), or produce, save, verify, compile
        and check its checkpoint, recording each part (and storing it in the step cache). What it produced
        (checkpoint, statistics, compiled program) is returned for the later phases to take as is.

        Long because: the job's record is built across its parts (timings, warnings, errors) in one place, so that
        every exit path writes the same job.json.
        """
        reused = self.reusable(name, checkpoint, hash_)
        if reused is not None:
            self.log.info(f"Reusing {name}: its input and configuration are unchanged (--retry)")
            record = self.store.read_job(name)
            if record is not None:
                self.store.write_job(replace(record, status=JobStatus.REUSED))
                self.run.module_map = compose(self.run.module_map, _module_map(record.changes))
            # not compiled in this run: the profiler finds the job's earlier compilation on disk, verified
            return ProducedCheckpoint(reused, ProgramStats.of_output(record.output if record else None, reused.sha256))
        job_dir = self.store.job_dir(name)
        artifacts = job_dir / "artifacts"
        artifacts.mkdir(parents=True, exist_ok=True)
        started = utc_now()
        t0 = time.perf_counter()
        earlier = self.store.read_job(name)  # its post-hoc rounds stay in the history (the report marks them older)
        record = JobRecord(
            name=name, step_type=step_type, step_index=index, checkpoint=checkpoint, status=JobStatus.IN_PROGRESS,
            created_at=started, started_at=started, parameters=parameters, config_hash=hash_, pid=os.getpid(),
            input=None if input_ref is None else JobInput(input_ref.name, input_ref.job,
                                                          os.path.relpath(input_ref.path, job_dir), input_ref.sha256),
            profile=tuple(p for p in (earlier.profile if earlier else ()) if p.trigger == "POSTHOC"),
            evaluation=tuple(e for e in (earlier.evaluation if earlier else ()) if e.trigger == "POSTHOC"),
        )
        if reuse_key is not None and self.steps is not None and not self.force:
            cached = self._from_step_cache(self.steps, reuse_key, record, input_ref)
            if cached is not None:
                return cached
        self.store.write_job(record)
        timings: dict[str, float] = {}

        def timed(part: str, work: Callable[[], _T]) -> _T:  # where a job's time goes, kept in job.json
            start = time.perf_counter()
            try:
                return work()
            finally:
                timings[f"{part}_s"] = round(time.perf_counter() - start, 3)

        try:
            outcome = timed("step", lambda: produce(artifacts))
            ref, output, for_lowering = timed("save", lambda: self._save(outcome, artifacts, name, checkpoint))
            stats = ProgramStats.of_output(output, ref.sha256)
            if self._lowers(checkpoint):
                compiled: CompiledCheckpoint | None = timed("compile",
                                                            lambda: self._compile(ref, job_dir, for_lowering, stats))
            else:
                compiled = None
                self.log.info(f"{checkpoint} is not lowered for {self.run.device.name} now: it is not listed under "
                              "profile: (np profile lowers it when asked)")
            key_map = compose(self.run.module_map, outcome.changes.get("module_map") or {})
            fidelity = timed("fidelity", lambda: self._fidelity(outcome, compiled, job_dir, checkpoint, key_map))
        except BaseException as exc:
            stopped = JobStatus.CANCELED if isinstance(exc, KeyboardInterrupt) else JobStatus.FAILED
            failed = replace(record, status=stopped,
                             ended_at=utc_now(), duration_s=round(time.perf_counter() - t0, 3),
                             errors=(ErrorRecord.of(exc),), timings=timings)
            self.store.write_job(failed)
            raise
        self.programs = {name: outcome.program}  # the step's own program (the lowering had a copy)
        from np_optimizer.layers.numerics import numerics_warnings

        numerics = numerics_warnings((fidelity or {}).get("layers") or {})  # zeroed or weak activations
        for text in numerics:
            self.log.warning(text)
        warnings = [*outcome.warnings, *_lowering_warning(compiled), *numerics]
        done = replace(record, status=JobStatus.SUCCESS, ended_at=utc_now(),
                       duration_s=round(time.perf_counter() - t0, 3), output=output,
                       changes=outcome.changes, parameters={**parameters, **outcome.parameters},
                       compile=compiled.record.summary() if compiled else NO_COMPILE,
                       fidelity=from_dict(Fidelity, fidelity), warnings=tuple(warnings), timings=timings)
        self.store.write_job(done)
        if reuse_key is not None and self.steps is not None and storable(compiled, fidelity):
            self.steps.put(reuse_key, artifacts, entry_record(done, outcome.parameters, fidelity,
                                                              [*outcome.warnings, *numerics], self.store.experiment),
                           known={CHECKPOINT_FILE: ref.sha256})
        if input_ref is not None:
            self.run.module_map = key_map
        return ProducedCheckpoint(ref, stats, compiled)

    def _from_step_cache(self, cache: StepCache, key: str, record: JobRecord,
                         input_ref: CheckpointRef | None) -> ProducedCheckpoint | None:
        """The job from the step cache's entry `key`: its files linked into the job's artifacts, its record parts,
        then compiled as any job is (a copy from the compile cache). None when there is no intact entry."""
        hit, warning = cache.get(key)
        if warning:
            self.log.warning(warning)
        if hit is None:
            return None
        t0 = time.perf_counter()
        job_dir = self.store.job_dir(record.name)
        artifacts = job_dir / "artifacts"
        try:
            place_files(hit, artifacts)
        except OSError as exc:  # pruned while linking: compute it instead
            self.log.warning(f"The step cache entry {hit.folder} could not be used ({exc.strerror or exc}); "
                             "running the step again.")
            return None
        done = reused_record(hit, record, job_dir, self.store.experiment)
        assert done.output is not None and done.reused_from is not None
        ref = CheckpointRef(record.checkpoint, record.name, artifacts / CHECKPOINT_FILE, done.output.sha256)
        self.log.info(f"Reusing {record.name} from the {done.reused_from.where}: its input and configuration are "
                      f"the same (saved {done.reused_from.saved_s or 0:.1f} s; np run --force computes it again)")
        self.progress(f"{record.name}: reused from the step cache")
        stats = ProgramStats.of_output(done.output, ref.sha256)
        compiled: CompiledCheckpoint | None = None
        timings = {"reuse_s": round(time.perf_counter() - t0, 3)}
        if self._lowers(record.checkpoint):
            start = time.perf_counter()
            compiled = self._compile(ref, job_dir, None, stats)
            timings["compile_s"] = round(time.perf_counter() - start, 3)
        self.store.write_job(replace(done, ended_at=utc_now(), duration_s=round(time.perf_counter() - t0, 3),
                                     compile=compiled.record.summary() if compiled else NO_COMPILE,
                                     warnings=(*done.warnings, *_lowering_warning(compiled)), timings=timings))
        if input_ref is not None:
            self.run.module_map = compose(self.run.module_map, _module_map(done.changes))
        self.programs = {}  # nothing in memory: the next step that runs loads the .pt2
        return ProducedCheckpoint(ref, stats, compiled)

    def _save(self, outcome: StepOutcome, artifacts: Path, name: str,
              checkpoint: str) -> tuple[CheckpointRef, JobOutput, Any]:
        """Save the checkpoint, hashing the bytes written; the program in memory is what the later steps and the
        compile take (the .pt2 is not read back: its bytes are torch.export.save's of that same program). The lowering
        gets a copy (graph.edit.copy_program), so nothing it does to the graph reaches the step's own program (still
        needed for the SNR and the next step)."""
        from np_optimizer.graph.edit import copy_program
        from np_optimizer.graph.program_io import write_program
        from np_optimizer.graph.stats import count_macs, count_params, node_count, weight_bytes

        self.progress(f"{name}: saving {checkpoint}")
        path = artifacts / CHECKPOINT_FILE
        sha = write_program(outcome.program, path)
        for_lowering = copy_program(outcome.program) if self._lowers(checkpoint) else None
        output = {"checkpoint": checkpoint, "file": f"artifacts/{CHECKPOINT_FILE}", "sha256": sha,
                  "size_bytes": path.stat().st_size, "params": count_params(outcome.program),
                  "macs": count_macs(outcome.program)[0],
                  "weight_bytes": weight_bytes(outcome.program), "nodes": node_count(outcome.program)}
        return CheckpointRef(checkpoint, name, path, sha), from_dict(JobOutput, output), for_lowering

    def _compile(self, ref: CheckpointRef, job_dir: Path, program: Any, stats: ProgramStats) -> CompiledCheckpoint:
        from np_optimizer.config.detail_config import time_limit
        from np_optimizer.logs import get_logger

        log = get_logger("Compiler")
        device = self.run.device
        self.progress(f"{ref.job}: compiling for {device.name}")
        limit, option = time_limit(self.run.config.run, self.run.config.detail, ref.name)
        watch = Watch(limit_s=limit, label=f"{ref.job}: lowering for {device.name}", option=option,
                      progress=self.progress, log=log, code="NP-CMP-504",
                      rerun="run `np run --retry` (the finished steps are reused)")
        handed = compile_for(ref, device, job_dir, stats=stats, program=program, watch=watch)
        compiled = handed.record
        reused = reuse_note(compiled)
        if reused:
            log.info(f"Reused the compiled {ref.name.lower()} for {device.name} ({compiled.pte_bytes or 0:,} B .pte): "
                     f"{reused}")
        elif compiled.status == CompileStatus.OK:
            log.info(f"Compiled {ref.name.lower()} for {device.name}: {compiled.pte_bytes:,} B .pte, "
                          f"{compiled.delegated_ops}/{compiled.total_ops} ops delegated "
                          f"({compiled.num_delegates} delegate(s)) in {compiled.seconds:.1f} s")
        elif compiled.status == CompileStatus.UNSUPPORTED:
            log.warning(f"Lowering unsupported for {ref.name.lower()} on {device.name}: {compiled.reason}")
        else:
            log.warning(f"Lowering failed for {ref.name.lower()} on {device.name}: {compiled.reason}")
        return handed

    def _fidelity(self, outcome: StepOutcome, compiled: CompiledCheckpoint | None, job_dir: Path, checkpoint: str,
                  key_map: dict[str, str | None]) -> dict[str, Any]:
        """Outputs against INPUT_MODEL's on the evaluation inputs: the exported program, and the .pte on this
        machine when the device's backend runs here (XNNPACK) and the checkpoint was lowered; and each layer's output
        against INPUT_MODEL's same layer, from the same pass (layers_snr.json)."""
        from np_optimizer.fidelity import compare_outputs
        from np_optimizer.layers.numerics import layer_snr, tap, write_numerics

        self.run.need_reference()
        evaluation = self.run.evaluation
        if evaluation is None or not self.run.reference_outputs:
            return {}
        start = time.perf_counter()
        # the step's own run on these inputs (GO's last check), else one now
        taps = outcome.taps if outcome.taps is not None else tap(outcome.program, evaluation.samples)
        outcome.taps = None  # not held beyond this job
        outputs = taps.outputs
        result: dict[str, Any] = {"vs": "INPUT_MODEL", "inputs": len(evaluation.samples), "source": evaluation.source,
                                  "program": compare_outputs(self.run.reference_outputs, outputs),
                                  "evaluated_on": "exported program (PyTorch reference kernels)"}
        reference = self.run.reference_taps
        failed = reference.error if reference is not None else "no reference"
        rows: list[dict[str, Any]] = []
        if reference is not None and not (failed := failed or taps.error):
            try:
                rows = layer_snr(reference, taps, key_map)
            except Exception as exc:  # a view's numbers never fail the job
                failed = f"{type(exc).__name__}: {exc}"
        if failed:
            result["layers"] = {"error": f"no per-layer SNR: {failed}"}
        else:
            result["layers"] = write_numerics(job_dir / "artifacts", checkpoint=checkpoint, rows=rows, key_map=key_map,
                                              inputs=len(evaluation.samples), source=evaluation.source,
                                              seconds=time.perf_counter() - start,
                                              relative_to=self.store.experiment.root)
        del taps
        pte = compiled.pte_path if compiled is not None and compiled.record.status == CompileStatus.OK else None
        if pte is not None and self.run.device.backend_spec.runs_on_host:
            from np_optimizer.adapters.executorch_runtime import run_pte_on

            try:
                pte_out = run_pte_on(pte, evaluation.samples)
                result["pte"] = compare_outputs(self.run.reference_outputs, [tuple(o) for o in pte_out])
                result["pte"]["evaluated_on"] = f"the .pte on this machine's ExecuTorch {tool_version('executorch')} runtime"
            except ToolError as exc:
                result["pte_error"] = exc.message
        return result


def _module_map(changes: Mapping[str, JsonValue]) -> dict[str, str | None]:
    """A reused job's map of renamed modules (changes["module_map"]), as lineage.compose takes it."""
    found = changes.get("module_map")
    return {k: v if isinstance(v, str) else None for k, v in found.items()} if isinstance(found, dict) else {}


def _lowering_warning(compiled: CompiledCheckpoint | None) -> list[str]:
    if compiled is None or compiled.record.status == CompileStatus.OK:
        return []
    return [f"Lowering {compiled.record.status} for {compiled.record.device}: {compiled.record.reason}"]
