"""The workflow engine: steps and workflows, and the lineage that lets them wake up.

    workflow    Step and Workflow (ctx, retries, gates, on_fail); drives any StepRunner
    lineage     lineage.json: which session each step used last
    continuity  continuity.json: whether each step continued or started fresh, and why
    loader      `module:attr` -> Workflow

Nothing here knows a particular flow: the ready-made one is flower/starter/. Nothing is imported
here, so each module loads alone (see docs/architecture.md).
"""
