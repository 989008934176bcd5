"""The job model, the bottom layer of flower_batch: what a job is and what became of it.

    spec      JobSpec, GatewaySpec, JobsFile: one job's inputs, the gateway it talks to
    modes     the gateway modes a job may name, and each one's label for people
    record    JobRecord and record.json (read, write, load a batch's records)
    outcome   Status, JobOutcome, StepSummary: how a run ended, decided from flower's manifest
    classes   FailureClass: agent / verifier / infrastructure, and the matrix exit codes
    units     durations and memory sizes (`90s`, `2g`), parsed and shown
    fields    one validator per job field (memory, cpus, pids, network, durations, budget,
              placement), shared by jobs.toml, the command line and the environment
    status    a job's final status (outcome and classes both use it)
    hashing   the stable hashes of files, folders and JSON that decide what a resume re-runs
    resume    plan_resume: keep, run or wake each job of a batch, from its record and today's inputs
    pausing   a persistent job at its budget: the cap it reached, its reason, its budget history

Everything above may import these modules (backend, layout, running, reports, the command line);
they import nothing of flower_batch but errors and envnames (tests/flower_batch/test_layering.py).
"""
