"""The job model, the bottom layer of flower_batch: what a job is and what became of it.

    status    Status (queued, running and every final status), NOT_ENDED, Phase (progress only)
    spec      JobSpec, GatewaySpec, JobsFile: one job's inputs, the gateway it talks to
    modes     the gateway modes a job may name, and each one's label for people
    record    JobRecord, typed, and record.json (read, write, load a batch's records)
    image     PinnedImage: the image a job runs on, by its immutable id, with its versions
    budget    Budget: a cap, "is it reached?", and a wake's new cap or +N (BudgetChange)
    pausing   a persistent job at its budget: the cap reached, its reason, the caps' history
    resume    which jobs a matrix keeps, runs again or wakes
    outcome   JobOutcome, StepSummary: how a run ended, decided from flower's manifest
    classes   FailureClass: agent / verifier / infrastructure, and the matrix exit codes
    units     durations and memory sizes (`90s`, `2g`), parsed and shown
    fields    one validator per job field (memory, cpus, pids, network, durations, budget,
              placement), shared by jobs.toml, the command line and the environment
    grading   Verifier (hidden tests run after the workflow) and Reward (what they wrote)
    harbor_task  HarborTask: where a task from a Harbor task folder came from
    hashing   the stable hashes of files, folders and JSON that decide what a resume re-runs

Everything above may import these modules (backend, layout, running, reports, the command line);
they import nothing of flower_batch but errors and envnames (tests/flower_batch/test_layering.py).
"""
