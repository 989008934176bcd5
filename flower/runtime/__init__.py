"""The runtime layer: one step = one session of the real CLI, kept alive across failures.

`engine.py` (Runtime) composes `sessions.py`, `attempt.py`, `handover.py`, `wrap_up.py`,
`hooks.py`, `interrupts.py`, `inflight.py`, `emit.py`, `turns.py`, `background.py`,
`resilience.py`, `manifest.py`; `limits.py` and `limit_env.py` are the job's limits and their
variables' names, `signals.py` what Ctrl-C, SIGTERM and SIGHUP do, `model_socket.py` the
model's socket relay in a job container.

Nothing is imported here, so `flower.runtime.signals` loads without the SDK (see docs/architecture.md).
"""
