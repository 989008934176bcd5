"""A job's conversations, read from its run_dir as the hostile input they are: `sessions` reads
sessions.db read-only and bounded; `steps` splits it by the manifest's rows (step attempts, judge
rounds, handoffs, subagents). The viewer shows them; the exporters (flower_batch/export/) convert
them, and the runner writes each job's ATIF trajectory with them when the job ends."""
