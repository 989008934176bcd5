"""The batch's model gateway: one HTTP server per batch, run as a sidecar container.

Every job reaches the model only through it, at `http://gateway:PORT/j/<job>` with a per-job
token as its API key. Modes: `scripted` (plays a scenario file: the offline model), later
`anthropic` (proxy with metering and budgets) and `replay` (a recorded job's responses).
"""
