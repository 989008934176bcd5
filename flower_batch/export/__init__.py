"""Results in the formats the field already reads (docs/export.md):

    atif.py             one job -> an ATIF trajectory (Harbor's RFC 0001), plain JSON data
    atif_session.py     one transcript -> ATIF steps (messages, tool calls, observations, metrics)
    costs.py            a model call's cost, priced the way the gateway metered it
    classes.py          a finished job's failure class
    trajectory_file.py  <job>/trajectory.json, written by the runner when a job ends
    inspect_log.py      a task x variant's jobs -> one Inspect AI eval log (JSON)
    inspect_messages.py one job's ATIF trajectory -> Inspect chat messages and model usage
    batch.py            a whole batch for `flower-batch export`

No exporter imports harbor or inspect-ai: both are test dependencies, and the tests read the
files back with their own validator and reader.
"""
