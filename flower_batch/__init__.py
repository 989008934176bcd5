"""flower-batch: run flower workflows in pinned containers — one job, a matrix, a reproduction.

Its layers, bottom to top (docs/architecture.md; tests/flower_batch/test_layering.py):

    errors           every error a user can cause, in one tree under FlowerBatchError
    envnames         which environment names a job may set, and which look like secrets
    labels           every label on what we make and on the runtime image
    outputlines      a container's output split into bounded lines
    untrusted_files  the files a job wrote, read as untrusted input: bounded, no symlink followed
    workspace_diff   what a job did to its workspace
    workspace_scan   what a job's workspace copy holds: no home, no ignored path, bounded
    jobmodel/        what a job is and what became of it: spec, record, outcome, resume
    layout           where a job's files are (Home, JobDir)
    backend/         the container engines behind one Backend: docker/, swarm/
    gateway/         the model gateway each batch's jobs talk to
    jobsfile/        jobs.toml parsed, validated, templated and expanded
    harbor/          Harbor task folders (Terminal-Bench 2's format) read as tasks
    transcripts/     a job's conversations read from its sessions.db
    export/          a batch as ATIF trajectories and Inspect eval logs
    running/         a job in a container: the runner, the scheduler, the image, repro
    preflight/       the checks before anything runs, one line per problem
    reports/         results.json, the table, report.html, JUnit
    compare/         a batch against another or a baseline
    view/            the trajectory viewer
    commands/        the command line's commands
    cli              the `flower-batch` app, assembled from commands/
"""

__version__ = "0.1.0"
