"""Backends: where containers run, behind one interface.

    base         the `Backend` interface and its data (ContainerSpec, ContainerInfo, ...)
    confinement  what every container of ours is confined to
    select       choosing the engine: `--backend`, FLOWER_BATCH_BACKEND, jobs.toml's [batch] backend
    secret_env   how a container's command finds its secrets (files, never its configuration)
    docker/      DockerBackend on the local engine (the only subpackage besides swarm/ that imports `docker`)
    swarm/       SwarmBackend on a Docker Swarm cluster

The in-memory backend the fast tests run on is tests/fake_backend.py: a test double, not a
backend anyone selects, so it is not shipped.
"""
