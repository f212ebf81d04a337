"""np sweep's machinery, below the API: search the optimization space of a project with real experiments, one per
trial. np_optimizer.api.sweep is the command; its trials run np_optimizer.api.trial (a floor above: the pools are
given it as a `Worker`).

    driver.py    the one process that drives the study: proposes trials, writes their experiments, hands them to a
                 pool, tells the study each trial's reported figures (Optuna ask/tell; only it writes the study)
    study.py     the Optuna study in the project's sweep/ folder (journal file), its sampler, deduplication, resume
    worker.py    what runs a trial (Worker) and the pools' protocol with it: the TrialJob in, JSON lines out
    values.py    a finished experiment's objective and constraint values, from its report (read by the worker)
    pool.py      the local pool: trials as child processes, their progress and result as JSON lines
    host.py      the pool's warm host: imports the worker's heavy modules once, forks a fresh child per trial
    warm.py      the pool's side of the host: start it, ask for a trial's process, hear of its end
    ray_pool.py  the same interface over plain Ray tasks (imported only with --ray)
    plan.py      --dry-run: the trials, each run.yaml checked, and the pool's size
    layers.py    the layer-guided strategy: float layers chosen from a W8-A8 trial's per-layer SNR
"""
