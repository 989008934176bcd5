"""`flower-batch view`: a read-only, live web viewer of a home's batches, jobs and trajectories.

    index.py       job rows from record.json files (cached by mtime: cheap to poll)
    server.py      the HTTP server on 127.0.0.1 and its JSON endpoints
    page.py        the page, its stylesheet and script
What it reads of a job's conversations lives in flower_batch/transcripts/ (the exporters
read them too); the workspace diff it shows lives in flower_batch/workspace_diff.py (the report uses it too).
"""
