"""The Backend on a Docker Swarm cluster: each job a one-task service.

backend       SwarmBackend: services, overlay networks, secrets, logs
service_spec  a ContainerSpec mapped onto a Swarm service spec, one field group at a time (pure)
tasks         a service's one task read as a container-like state (pure)
fit           whether any node could ever hold a task's reservation (pure)
logs          a service's log as it streams: lines and their stamps (pure)
storage       checking from the nodes that a folder is shared storage
sweep         what `gc` runs on every node: containers of dead leases only a node still holds
task_signals  `python -m flower_batch.backend.swarm.task_signals`: runs INSIDE each job task,
              forwarding signals from a control file and checking the node's image
"""
