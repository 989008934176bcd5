"""The Backend on the local Docker engine, and what else the engine does for us.

backend     DockerBackend: containers, networks, volumes, logs, through the docker SDK's low-level API
container_config  a ContainerSpec mapped onto the engine's create call, one field group at a time
connection  connecting to the engine; the only place `docker` exceptions are translated
host_helper a container that runs commands as root in our mount namespace (a job's disk, not as root)
engine      what the engine accepts and its host has (the facts pre-flight checks limits against)
images      image build, inspect and remove for `flower_batch.running.image`
loopback_hosts  the /etc/hosts (localhost only) of a no-network container, written 0444 in the user's cache
registry    `flower-batch image push REGISTRY`, and the repo digest a cluster pulls by
secret_handover  a container's secrets on an engine with no secret store: a tmpfs, filled from stdin at start
transient   which engine calls are sent again after a transient failure (reads and wait, never a change)
"""
