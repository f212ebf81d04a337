"""np run, above the phases: the steps (np_optimizer.pipeline), then the Evaluation phase (evaluation_phase.py, over
np_optimizer.evaluate) and the Profiling phase (profiling_phase.py, over np_optimizer.profiler). The phases below
take plain records (checkpoint refs, the device, options); only this package knows the run's context."""

from np_optimizer.runner.run import run_experiment

__all__ = ["run_experiment"]
