"""Repeated experiments: spec (TOML) → runner (backends) → runs (processes) → store (SQLite + files).

    spec.py         load_spec / select: a validated ExperimentSpec, or a one-line SpecError
    runner.py       Runner.create(spec) / Runner.resume(dir), start(), stop(run_id), stop_all()
    plan.py         which runs, in what order (warm-ups first, interleaved), which next
    launch.py       one run's terms: its LaunchRequest and TUIPROF_* environment, its ending
    events.py       what a running Runner reports through on_event (from its own threads)
    store.py        the directory's layout and load_experiment(dir) (read-only, any time)
    writer.py       ExperimentStore: the one writer (schema, transactions, resume, orphans)
    runner_lock.py  the flock that makes that writer the only one
    protocol.py     the JSON-lines metrics protocol jobs write to $TUIPROF_METRICS_FILE
    fingerprint.py  the environment a run ran in (GPU, driver, CUDA, frameworks, host, CPU)
    backends/       where runs execute: local processes now; the interface a cluster engine plugs into
Nothing here imports textual or tensorflow.
"""
