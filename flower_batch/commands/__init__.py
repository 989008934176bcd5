"""The `flower-batch` command line's commands; `flower_batch.cli` assembles them into the app.

    init          init: a project's starter files (jobs, workflows, an offline scenario), never overwriting
    jobs          run, wake, ls/status, show, logs, stop, gc
    ls_table      the `ls` table, fitted to the terminal without cutting a job id
    image         image build / show / push
    matrix        matrix, report (with plan_summary: what `matrix --dry-run` prints)
    compare       compare two batches, or a batch and its baseline
    repro         repro: a recorded job again, and the diff
    view          view: the trajectory viewer
    export        export: a batch as ATIF trajectories or Inspect eval logs
    attempts      gc --attempts: the only way kept earlier attempts are removed
    gc_images     gc --images: the images built from task folders, flower's runtime volumes
    environments  --image / --build and jobs.toml's image/build: the runtime and the task's own image, pinned
    preflight     the checks before a job runs, as the commands report them
    version       `--version`: the versions and the runtime image
    completion    shell completion of job ids and batch names
    options       the options shared by the commands, declared once (each --budget-usd says what it caps)
    common        what the commands share: consoles, `fail`, --home / --backend, job lookup,
                  the signal-aware async runner

Each module exports plain command functions and never imports `flower_batch.cli` (the app), so
importing one registers nothing. Modules here import by absolute name.
"""
