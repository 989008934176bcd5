"""The runtime layer: one step = one session of the real CLI, kept alive across failures.

Nothing is imported here, so `flower.runtime.signals` loads without the SDK (see docs/architecture.md).
"""
