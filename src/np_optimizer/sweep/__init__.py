"""np sweep: search the optimization space of a project with real experiments, one per trial.

    driver.py    the one process that drives the study: proposes trials, writes their experiments, hands them to a
                 pool, reads their results back and tells the study (Optuna ask/tell; only it writes the study)
    study.py     the Optuna study in the project's sweep/ folder (journal file), its sampler, deduplication, resume
    trial.py     one trial run to its end (the worker side: a local process or a Ray task), and its outcome
    values.py    a finished experiment's objective and constraint values, from its report
    pool.py      the local pool: trials as child processes, their progress as JSON lines
    ray_pool.py  the same interface over plain Ray tasks (imported only with --ray)
    layers.py    the layer-guided strategy: float layers chosen from a W8-A8 trial's per-layer SNR
"""
