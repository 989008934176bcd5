"""Backends: the interface (`base`), `DockerBackend` (`docker_backend`), `SwarmBackend` (`swarm`), `FakeBackend` (`fake`).

Only this package imports `docker`.
"""
