"""Running jobs: from a JobSpec to a container, its checks and its record.

    plan         BatchPlan: what a run of jobs is given (`matrix`; `run`, `wake`, `repro`: a batch of one)
    batch        the one path that runs a plan: rounds with infrastructure retries, events; run_one
    jobs         a `run` job's inputs from the command line; whether a gateway starts beside its job
    runner       one job in one container: stage the workflow, run, check, write the record
    workspace_copy  a job's workspace copied by the scan's rules, off the event loop; the size limit
    deadline     what flower is told of the job's limits, and how long the runner waits for it
    targets      where the job's workflow code is staged and what the container runs
    scheduler    a plan's jobs under a parallelism cap: their records, gateways and contexts
    infra_retry  which infrastructure failures are run again
    attempts     earlier attempts kept under <job>/attempts/
    causes       the real cause of a job's end (runs/.exit.json, OOMKilled, exit 137)
    joblog       the container log, capped per run
    home_space   the home's reserve: under it no job starts (skipped), a paused job stays paused
    job_disk     a job's own disk: an ext4 image the engine mounts, its folders synced in and out
    disk_ops     its root-only steps: done as root, or by a helper container (the docker group)
    lease        the orchestrator's lock, and finding what a dead one leaked (`gc`)
    liveness     records whose orchestrator is gone: orphaned, never started
    image        the runtime image: build, reuse, versions (`python -m flower_batch.running.image`)
    task_images  each job's own image (`image`, `build`) resolved, built and pinned before anything runs
    bundle       flower brought into an image it did not build (the runtime's volume), and the image's probe
    layered      on a cluster: the runtime layered onto each task image, probed, pushed to the registry
    image_sources  where the build's files, lock and caches are: the checkout, or the installed tool
    repro        a recorded job again on its pinned image (plan, drift), and the two runs' diff
    wake         a persistent job continued: its record checked, its spec changed as asked, its batch of one
    job_root     the sandbox a job asked for (root, user, workdir) resolved against its image and engine
    workdir_seed  a workspace that is the image's own folder: copied out of the image as hostile input
    root_watch   a writable root's writes bounded where the engine has no quota (SizeRw watchdog)
    state_image  a writable-root job's ended container committed: for its tests and `wake`
    verifier     hidden tests after the workflow, in a fresh container of the job's final state
    rewards      a verifier's reward.txt / reward.json read as hostile input
    grading_verdict  the verdict from a reward and the job's threshold
    oracle       `matrix --oracle`: each Harbor task's solution/solve.sh instead of a workflow

It sits on the job model, layout, backend and gateway, and never imports the command line. Its
modules import each other and the layers below by absolute name.
"""
